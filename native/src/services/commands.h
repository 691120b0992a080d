/* Commands for an agent's progress thread (commands.c). */
#ifndef KVT_COMMANDS_H
#define KVT_COMMANDS_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pthread.h>
#include <stdatomic.h>

typedef struct kvt_agent kvt_agent;
struct kvt_op;

enum kvt_command_kind {
    KVT_CMD_POST, /* op */
    KVT_CMD_CALL, /* run `call(agent, arg)` on the progress thread and report its status */
    KVT_CMD_STOP, /* shut down: close the connections (by agent->shutdown_deadline_ns), stop the backend */
};

typedef kvt_status (*kvt_command_call_fn)(kvt_agent *agent, void *arg, char *detail, size_t detail_size);

typedef struct kvt_command {
    enum kvt_command_kind kind;
    struct kvt_op *op;
    kvt_command_call_fn call;
    void *arg;
    /* Synchronous commands: the caller waits on the queue's `done` until `done`. */
    bool sync, done;
    kvt_status result;
    char detail[512];
    struct kvt_command *next;
} kvt_command;

/* An agent's commands for its progress thread. `owner_lock` is the agent's lock: submitters hold it, and
 * synchronous ones wait on `done` under it. `lock` is a leaf lock, taken inside the owner's by submitters
 * and alone by the progress thread, which so takes its commands without the owner's lock. */
typedef struct kvt_command_queue {
    pthread_mutex_t *owner_lock;
    pthread_cond_t done;
    pthread_mutex_t lock;
    kvt_command *first, *tail;
    _Atomic bool pending;
    /* A caller waits on a queued command (it holds the JavaScript thread): the round of operations in
     * progress stops after the operation it is at, rather than after every operation's slice. */
    _Atomic bool caller_waiting;
    _Atomic bool sleeping; /* the progress thread may be asleep: a queued command must kick it */
    int fd;                /* eventfd the progress thread sleeps on */
} kvt_command_queue;

/* Sets the queue up for the agent whose lock is `owner_lock`; false (errno set) when no eventfd can be made. */
bool kvt_commands_init(kvt_command_queue *queue, pthread_mutex_t *owner_lock);
void kvt_commands_destroy(kvt_command_queue *queue);
/* Wakes the progress thread. */
void kvt_command_kick(kvt_command_queue *queue);
/* Queues a command for the progress thread; sync commands wait (the owner's lock must be held). */
void kvt_command_submit_locked(kvt_command_queue *queue, kvt_command *command);
/* Queues an asynchronous command (the owner's lock held or not): the progress thread is kicked only when
 * it may be asleep (kvt_commands_sleep_begin). */
void kvt_command_post(kvt_command_queue *queue, kvt_command *command);
/* Runs `call` on the progress thread and returns its status, copying its detail. Owner's lock not held. */
kvt_status kvt_command_call(kvt_command_queue *queue, kvt_command_call_fn call, void *arg);
/* An asynchronous KVT_CMD_CALL of `call` with room for `arg_size` bytes of argument at command->arg, for
 * kvt_command_post; NULL when out of memory. The progress thread frees it once it ran. */
kvt_command *kvt_command_new_async(kvt_command_call_fn call, size_t arg_size);
/* Queues `call` with a copy of `arg` for the progress thread and returns at once (its status is dropped);
 * false (nothing queued) when out of memory. */
bool kvt_command_try_call_async(kvt_command_queue *queue, kvt_command_call_fn call, const void *arg, size_t arg_size);
/* As kvt_command_try_call_async, but waits for the call instead when out of memory. */
void kvt_command_call_async(kvt_command_queue *queue, kvt_command_call_fn call, const void *arg, size_t arg_size);
/* (P) Takes every queued command, oldest first (NULL when none). */
kvt_command *kvt_commands_take(kvt_command_queue *queue);
/* (P) Runs a KVT_CMD_CALL for `agent` and reports it to its caller (a sync one) or frees it. */
void kvt_command_run_call(kvt_command_queue *queue, kvt_agent *agent, kvt_command *command);
/* (P) Consumes the kicks counted on the eventfd. */
void kvt_commands_drain_fd(kvt_command_queue *queue);
/* (P) Before the progress thread sleeps (on `fd`): from here on every command queued kicks it; true when no
 * command is pending, so it may sleep. kvt_commands_sleep_end after the sleep (or instead of it) stops the
 * kicks and consumes those counted. */
bool kvt_commands_sleep_begin(kvt_command_queue *queue);
void kvt_commands_sleep_end(kvt_command_queue *queue);

#endif
