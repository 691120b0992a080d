/* Delivery: completions and notifications received for the consumer, the wake-up edge and pipe, the calls
 * that poll and wait for them, and notifications sent to peers. */
#include "services/delivery.h"

#include "services/entry.h"
#include "services/status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

kvt_status kvt_delivery_init(kvt_delivery *delivery, pthread_mutex_t *owner_lock, kvt_counter_set *counters,
                             kvt_notification_sender send) {
    delivery->send = send;
    delivery->owner_lock = owner_lock;
    delivery->counters = counters;
    delivery->wake_pipe[0] = delivery->wake_pipe[1] = -1;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&delivery->pending_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&delivery->lock, NULL);
    delivery->notifications = calloc(KVT_MAX_PENDING_NOTIFICATIONS, sizeof *delivery->notifications);
    if (!delivery->notifications) return kvt_fail(KVT_ERR_NO_MEMORY, "kvt_agent_create: out of memory");
    if (pipe2(delivery->wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0)
        return kvt_fail(KVT_ERR_BACKEND, "kvt_agent_create: pipe2 failed: %s", strerror(errno));
    return KVT_OK;
}

void kvt_delivery_destroy(kvt_delivery *delivery) {
    if (delivery->wake_pipe[0] >= 0) close(delivery->wake_pipe[0]);
    if (delivery->wake_pipe[1] >= 0) close(delivery->wake_pipe[1]);
    /* The agent's gauges die with it; the process-wide one was adjusted as notifications came and went. */
    kvt_counter_add(NULL, KVT_COUNTER_PENDING_NOTIFICATIONS, -(int64_t)delivery->notification_count);
    for (size_t i = 0; i < delivery->notification_count; i++)
        free(delivery->notifications[(delivery->notification_head + i) % KVT_MAX_PENDING_NOTIFICATIONS]);
    free(delivery->notifications);
    pthread_cond_destroy(&delivery->pending_cond);
    pthread_mutex_destroy(&delivery->lock);
}

void kvt_wake_consumer(kvt_delivery *delivery) {
    const char byte = 1;
    ssize_t written = write(delivery->wake_pipe[1], &byte, 1);
    (void)written; /* EAGAIN: the pipe is full, so the reader is already woken */
}

/* Whether the wake-up edge fires now (delivery lock held): the first time since the last poll. */
static bool fire_wake_delivery_locked(kvt_delivery *delivery) {
    if (delivery->wake_signaled) return false;
    delivery->wake_signaled = true;
    return true;
}

bool kvt_signal_pending_locked(kvt_delivery *delivery) {
    pthread_cond_broadcast(&delivery->pending_cond);
    pthread_mutex_lock(&delivery->lock);
    bool wake = fire_wake_delivery_locked(delivery);
    pthread_mutex_unlock(&delivery->lock);
    return wake;
}

void kvt_completion_push_locked(kvt_delivery *delivery, kvt_completion *completion, uint64_t op_id, int32_t status,
                                uint64_t bytes_done) {
    pthread_mutex_lock(&delivery->lock);
    completion->queued = true;
    completion->op_id = op_id;
    completion->status = status;
    completion->bytes_done = bytes_done;
    completion->next = NULL;
    completion->prev = delivery->completions_last;
    if (delivery->completions_last)
        delivery->completions_last->next = completion;
    else
        delivery->completions_first = completion;
    delivery->completions_last = completion;
    delivery->completion_count++;
    pthread_mutex_unlock(&delivery->lock);
}

/* Takes a queued completion off the queue (delivery lock held). */
static void completion_remove_delivery_locked(kvt_delivery *delivery, kvt_completion *completion) {
    if (!completion->queued) return;
    if (completion->prev)
        completion->prev->next = completion->next;
    else
        delivery->completions_first = completion->next;
    if (completion->next)
        completion->next->prev = completion->prev;
    else
        delivery->completions_last = completion->prev;
    completion->queued = false;
    completion->prev = completion->next = NULL;
    delivery->completion_count--;
}

void kvt_completion_remove_locked(kvt_delivery *delivery, kvt_completion *completion) {
    pthread_mutex_lock(&delivery->lock);
    completion_remove_delivery_locked(delivery, completion);
    pthread_mutex_unlock(&delivery->lock);
}

/* What is queued for the consumer, as KVT_PENDING_* bits (delivery lock held). Peer reports are counted
 * before they are signalled (kvt_signal_pending_locked takes the delivery lock), so a re-arm that reads none
 * here is followed by that signal's byte. */
static uint32_t pending_delivery_locked(const kvt_delivery *delivery) {
    return (delivery->completion_count > 0 ? KVT_PENDING_COMPLETIONS : 0) |
           (delivery->notification_count > 0 ? KVT_PENDING_NOTIFICATIONS : 0) |
           (atomic_load(&delivery->peer_events_pending) > 0 ? KVT_PENDING_PEER_EVENTS : 0);
}

static bool anything_pending(kvt_delivery *delivery) {
    pthread_mutex_lock(&delivery->lock);
    bool pending = pending_delivery_locked(delivery) != 0;
    pthread_mutex_unlock(&delivery->lock);
    return pending;
}

/* Re-arms the wake-up edge after a poll (delivery lock held): true when something is still pending, so a byte
 * is due at once. Whatever is queued later fires the edge again: no wake-up is lost between a poll and this. */
static bool rearm_wake_delivery_locked(kvt_delivery *delivery, uint32_t *pending) {
    delivery->wake_signaled = false;
    *pending = pending_delivery_locked(delivery);
    return *pending != 0 && fire_wake_delivery_locked(delivery);
}

bool kvt_rearm_wake(kvt_delivery *delivery) {
    uint32_t pending;
    pthread_mutex_lock(&delivery->lock);
    bool wake = rearm_wake_delivery_locked(delivery, &pending);
    pthread_mutex_unlock(&delivery->lock);
    return wake;
}

kvt_status kvt_agent_wake_fd(uint32_t agent_id, int32_t *out_fd) {
    kvt_detail_clear();
    if (!out_fd) return kvt_count_result(NULL, kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_agent_wake_fd: out_fd is NULL"));
    kvt_agent *agent;
    kvt_status status = kvt_enter_any_state(agent_id, "kvt_agent_wake_fd", &agent);
    if (status != KVT_OK) return status;
    *out_fd = kvt_entry_of(agent)->delivery->wake_pipe[0];
    kvt_agent_release(agent);
    return KVT_OK;
}

kvt_status kvt_agent_poll(uint32_t agent_id, uint32_t capacity, uint64_t *op_ids, int32_t *statuses,
                          uint64_t *bytes_done, uint32_t *out_count, uint32_t *out_pending) {
    kvt_agent *agent;
    kvt_status status =
        kvt_poll_enter(agent_id, "kvt_agent_poll", out_count && (capacity == 0 || (op_ids && statuses && bytes_done)),
                       "out_count and (capacity > 0) the arrays must not be NULL", &agent);
    if (status != KVT_OK) return status;
    kvt_registration *entry = kvt_entry_of(agent);
    kvt_delivery *delivery = entry->delivery;
    uint32_t n = 0, pending;
    /* Without the agent lock: a queued completion is final (its op was terminal before it was queued) and
     * it is not freed while queued (kvt_xfer_release takes it off the queue first). The dequeue, the pending
     * bits and the re-arm are one hold of the delivery lock, so the bits are what the re-arm saw. */
    pthread_mutex_lock(&delivery->lock);
    while (n < capacity && delivery->completions_first) {
        kvt_completion *completion = delivery->completions_first;
        completion_remove_delivery_locked(delivery, completion);
        op_ids[n] = completion->op_id;
        statuses[n] = completion->status;
        bytes_done[n] = completion->bytes_done;
        n++;
    }
    bool wake = rearm_wake_delivery_locked(delivery, &pending);
    pthread_mutex_unlock(&delivery->lock);
    if (wake) kvt_wake_consumer(delivery);
    *out_count = n;
    if (out_pending) *out_pending = pending;
    kvt_entry_release(entry);
    return KVT_OK;
}

kvt_status kvt_agent_wait(uint32_t agent_id, uint32_t timeout_ms) {
    kvt_registration *entry;
    kvt_status status = kvt_enter_entry(agent_id, "kvt_agent_wait", &entry);
    if (status != KVT_OK) return status;
    kvt_delivery *delivery = entry->delivery;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(delivery->owner_lock);
    delivery->blocked_waits++;
    while (!anything_pending(delivery) && !entry->closing) {
        if (pthread_cond_timedwait(&delivery->pending_cond, delivery->owner_lock, &deadline) == ETIMEDOUT) break;
    }
    delivery->blocked_waits--;
    bool pending = anything_pending(delivery);
    pthread_mutex_unlock(delivery->owner_lock);
    kvt_entry_release(entry);
    /* Not counted as an error: "nothing pending yet" is an ordinary answer of a wait. */
    if (!pending)
        return kvt_fail(KVT_ERR_TIMEOUT, "kvt_agent_wait: nothing pending on agent %u after %u ms", agent_id,
                        timeout_ms);
    return KVT_OK;
}

kvt_status kvt_agent_blocked_waits(uint32_t agent_id, uint32_t *out_count) {
    kvt_registration *entry;
    kvt_status status = kvt_enter_entry(agent_id, "kvt_agent_blocked_waits", &entry);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(entry->lock);
    *out_count = entry->delivery->blocked_waits;
    pthread_mutex_unlock(entry->lock);
    return kvt_entry_finish(entry, KVT_OK);
}

/* ---- notifications ---------------------------------------------------------------------- */

kvt_status kvt_notify_send(uint32_t agent_id, uint32_t peer_id, uint64_t peer_generation, const uint8_t *data,
                           uint32_t length) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_notify_send", &agent);
    if (status != KVT_OK) return status;
    if (length == 0 || length > KVT_MAX_NOTIFICATION || !data)
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_INVALID_PARAM,
                                                "kvt_notify_send: a notification has 1..%u bytes (got %u, data %s)",
                                                KVT_MAX_NOTIFICATION, length, data ? "given" : "NULL"));
    kvt_delivery *delivery = kvt_entry_of(agent)->delivery;
    status = delivery->send(agent, peer_id, peer_generation, data, length);
    if (status == KVT_OK) kvt_counter_add(delivery->counters, KVT_COUNTER_NOTIFICATIONS_SENT, 1);
    return kvt_agent_finish(agent, status);
}

void kvt_deliver_notification(kvt_delivery *delivery, const char *sender, const uint8_t *data, uint32_t length) {
    kvt_notification *note = NULL;
    if (length <= KVT_MAX_NOTIFICATION) note = malloc(sizeof *note + length);
    if (note) {
        snprintf(note->sender, sizeof note->sender, "%s", sender);
        note->length = length;
        if (length) memcpy(note->data, data, length);
    }
    pthread_mutex_lock(delivery->owner_lock); /* kvt_agent_wait looks for it under the lock */
    pthread_mutex_lock(&delivery->lock);
    bool queued = note && delivery->notification_count < KVT_MAX_PENDING_NOTIFICATIONS;
    if (queued) {
        size_t slot = (delivery->notification_head + delivery->notification_count) % KVT_MAX_PENDING_NOTIFICATIONS;
        delivery->notifications[slot] = note;
        delivery->notification_count++;
        kvt_counter_add(delivery->counters, KVT_COUNTER_NOTIFICATIONS_RECEIVED, 1);
        kvt_counter_add(delivery->counters, KVT_COUNTER_PENDING_NOTIFICATIONS, 1);
    } else {
        kvt_counter_add(delivery->counters, KVT_COUNTER_NOTIFICATIONS_DROPPED, 1);
    }
    pthread_mutex_unlock(&delivery->lock);
    bool wake = queued && kvt_signal_pending_locked(delivery);
    pthread_mutex_unlock(delivery->owner_lock);
    if (!queued) free(note);
    if (wake) kvt_wake_consumer(delivery);
}

/* The next notification when the capacities fit it (delivery lock held); else INVALID_PARAM, with what it needs. */
static kvt_status take_notification_locked(kvt_delivery *delivery, uint32_t sender_capacity, uint32_t data_capacity,
                                           kvt_notification **taken, size_t *name_length, uint32_t *needed_length) {
    if (delivery->notification_count == 0) return KVT_OK;
    kvt_notification *note = delivery->notifications[delivery->notification_head];
    *name_length = strlen(note->sender);
    *needed_length = note->length;
    if (sender_capacity <= *name_length || data_capacity < note->length) return KVT_ERR_INVALID_PARAM;
    *taken = note;
    delivery->notifications[delivery->notification_head] = NULL;
    delivery->notification_head = (delivery->notification_head + 1) % KVT_MAX_PENDING_NOTIFICATIONS;
    delivery->notification_count--;
    kvt_counter_add(delivery->counters, KVT_COUNTER_PENDING_NOTIFICATIONS, -1);
    return KVT_OK;
}

kvt_status kvt_notify_poll(uint32_t agent_id, char *sender, uint32_t sender_capacity, uint8_t *data,
                           uint32_t data_capacity, uint32_t *out_length, uint32_t *out_got) {
    kvt_agent *agent;
    kvt_status status = kvt_poll_enter(agent_id, "kvt_notify_poll", sender && data && out_length && out_got,
                                       "sender, data, out_length and out_got must not be NULL", &agent);
    if (status != KVT_OK) return status;
    kvt_registration *entry = kvt_entry_of(agent);
    kvt_delivery *delivery = entry->delivery;
    *out_got = 0;
    kvt_notification *taken = NULL;
    size_t name_length = 0;
    uint32_t needed_length = 0;
    pthread_mutex_lock(&delivery->lock); /* not the agent lock: see kvt_delivery.lock */
    status = take_notification_locked(delivery, sender_capacity, data_capacity, &taken, &name_length, &needed_length);
    pthread_mutex_unlock(&delivery->lock);
    if (taken) {
        memcpy(sender, taken->sender, name_length + 1);
        memcpy(data, taken->data, taken->length);
        *out_length = taken->length;
        *out_got = 1;
        free(taken);
    } else if (status != KVT_OK) {
        kvt_fail(status,
                 "kvt_notify_poll: the next notification needs sender capacity %zu and data capacity %u (got %u and "
                 "%u); it stays queued",
                 name_length + 1, needed_length, sender_capacity, data_capacity);
    }
    if (kvt_rearm_wake(delivery)) kvt_wake_consumer(delivery);
    return kvt_entry_finish(entry, status);
}
