/* Commands for an agent's progress thread: synchronous and asynchronous calls, posts and the stop. */
#include "services/commands.h"

#include "services/status.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

bool kvt_commands_init(kvt_command_queue *queue, pthread_mutex_t *owner_lock) {
    queue->owner_lock = owner_lock;
    pthread_cond_init(&queue->done, NULL);
    pthread_mutex_init(&queue->lock, NULL);
    queue->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return queue->fd >= 0;
}

void kvt_commands_destroy(kvt_command_queue *queue) {
    if (queue->fd >= 0) close(queue->fd);
    pthread_cond_destroy(&queue->done);
    pthread_mutex_destroy(&queue->lock);
}

void kvt_command_kick(kvt_command_queue *queue) {
    uint64_t one = 1;
    ssize_t written = write(queue->fd, &one, sizeof one);
    (void)written; /* EAGAIN: the counter is already non-zero, the thread will wake */
}

/* Links `command` at the tail and marks the queue pending; true when the progress thread must be kicked. */
static bool enqueue(kvt_command_queue *queue, kvt_command *command, bool sync) {
    command->next = NULL;
    command->done = false;
    pthread_mutex_lock(&queue->lock);
    if (queue->tail)
        queue->tail->next = command;
    else
        queue->first = command;
    queue->tail = command;
    /* Sequentially consistent, against the progress thread's store of `sleeping` and load of `pending`
     * (kvt_commands_sleep_begin): one of the two sees the other, so an awake thread is not kicked (a system
     * call per post) and a sleeping one always is. */
    atomic_store(&queue->pending, true);
    if (sync) atomic_store_explicit(&queue->caller_waiting, true, memory_order_relaxed);
    pthread_mutex_unlock(&queue->lock);
    return atomic_load(&queue->sleeping);
}

void kvt_command_submit_locked(kvt_command_queue *queue, kvt_command *command) {
    bool sync = command->sync; /* an asynchronous command may be run and freed once it is queued */
    if (enqueue(queue, command, sync)) kvt_command_kick(queue);
    if (sync)
        while (!command->done) pthread_cond_wait(&queue->done, queue->owner_lock);
}

void kvt_command_post(kvt_command_queue *queue, kvt_command *command) {
    if (enqueue(queue, command, false)) kvt_command_kick(queue);
}

bool kvt_commands_sleep_begin(kvt_command_queue *queue) {
    atomic_store(&queue->sleeping, true);
    return !atomic_load(&queue->pending);
}

void kvt_commands_sleep_end(kvt_command_queue *queue) {
    atomic_store(&queue->sleeping, false);
    kvt_commands_drain_fd(queue);
}

kvt_status kvt_command_call(kvt_command_queue *queue, kvt_command_call_fn call, void *arg) {
    kvt_command command = {.kind = KVT_CMD_CALL, .call = call, .arg = arg, .sync = true};
    pthread_mutex_lock(queue->owner_lock);
    kvt_command_submit_locked(queue, &command);
    pthread_mutex_unlock(queue->owner_lock);
    if (command.result != KVT_OK && command.result != KVT_IN_PROGRESS)
        return kvt_fail(command.result, "%s", command.detail);
    return command.result;
}

kvt_command *kvt_command_new_async(kvt_command_call_fn call, size_t arg_size) {
    /* One block: the command, then the argument (suitably aligned after it). */
    size_t offset = (sizeof(kvt_command) + 15u) & ~(size_t)15u;
    kvt_command *command = malloc(offset + arg_size);
    if (command) *command = (kvt_command){.kind = KVT_CMD_CALL, .call = call, .arg = (char *)command + offset};
    return command;
}

bool kvt_command_try_call_async(kvt_command_queue *queue, kvt_command_call_fn call, const void *arg, size_t arg_size) {
    kvt_command *command = kvt_command_new_async(call, arg_size);
    if (!command) return false;
    memcpy(command->arg, arg, arg_size);
    kvt_command_post(queue, command);
    return true;
}

void kvt_command_call_async(kvt_command_queue *queue, kvt_command_call_fn call, const void *arg, size_t arg_size) {
    if (!kvt_command_try_call_async(queue, call, arg, arg_size))
        kvt_command_call(queue, call, (void *)(uintptr_t)arg); /* no memory: wait for it instead */
}

kvt_command *kvt_commands_take(kvt_command_queue *queue) {
    if (!atomic_load_explicit(&queue->pending, memory_order_acquire)) return NULL;
    pthread_mutex_lock(&queue->lock);
    kvt_command *command = queue->first;
    queue->first = queue->tail = NULL;
    atomic_store_explicit(&queue->pending, false, memory_order_relaxed);
    atomic_store_explicit(&queue->caller_waiting, false, memory_order_relaxed);
    pthread_mutex_unlock(&queue->lock);
    return command;
}

void kvt_command_run_call(kvt_command_queue *queue, kvt_agent *agent, kvt_command *command) {
    command->detail[0] = '\0';
    command->result = command->call(agent, command->arg, command->detail, sizeof command->detail);
    if (!command->sync) {
        free(command); /* asynchronous calls are heap blocks owned by the queue */
        return;
    }
    pthread_mutex_lock(queue->owner_lock);
    command->done = true;
    pthread_cond_broadcast(&queue->done);
    pthread_mutex_unlock(queue->owner_lock);
}

void kvt_commands_drain_fd(kvt_command_queue *queue) {
    uint64_t value;
    ssize_t got = read(queue->fd, &value, sizeof value);
    (void)got;
}
