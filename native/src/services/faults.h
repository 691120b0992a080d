/* Fault injection: one-shot failures, delayed completions, paused issuing, a stalled progress thread (faults.c),
 * heartbeat rounds on demand (heartbeat_rounds.c). */
#ifndef KVT_FAULTS_H
#define KVT_FAULTS_H

#include "kvreuse_transport.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct kvt_fault {
    uint32_t remaining; /* 0 = disarmed; the call that brings it to 0 fails */
    kvt_status code;
} kvt_fault;

/* An agent's faults: `points` under the agent's lock, the rest read by its progress thread without it. */
typedef struct kvt_faults {
    kvt_fault points[KVT_FAULT_ALLOCATION + 1];
    /* Some point is armed (written under the agent's lock): while none is, the calls that would consume one
     * skip the lock (kvt_fault_take). */
    _Atomic bool armed;
    _Atomic bool progress_stalled; /* kvt_fault_stall_progress */
    _Atomic bool stall_entered;    /* the progress thread saw progress_stalled (kvt_fault_stall_progress waits) */
    _Atomic uint32_t delay_ms;     /* kvt_fault_delay_completions */
    _Atomic uint64_t issue_limit;  /* kvt_fault_pause_issue: bytes of each operation the backend may issue */
    _Atomic bool heartbeat_held;   /* kvt_fault_heartbeat_rounds: the heartbeat runs only the rounds asked */
    /* Rounds kvt_fault_heartbeat_rounds asked for so far, and how many of them the progress thread ran. */
    _Atomic uint64_t heartbeat_rounds_asked, heartbeat_rounds_run;
} kvt_faults;

void kvt_faults_init(kvt_faults *faults);
/* Consumes a one-shot fault at `point` (the agent's lock held): its code, or KVT_OK. */
kvt_status kvt_fault_take_locked(kvt_faults *faults, uint32_t point);
/* As kvt_fault_take_locked, taking `lock` (the agent's, not held) only when some point is armed. A fault
 * armed by this thread before is always seen; one another thread arms meanwhile may be seen or not, as
 * when the call had come first. */
kvt_status kvt_fault_take(kvt_faults *faults, pthread_mutex_t *lock, uint32_t point);

#endif
