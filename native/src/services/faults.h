/* Fault injection: one-shot failures, delayed completions, paused issuing, a stalled progress thread (faults.c). */
#ifndef KVT_FAULTS_H
#define KVT_FAULTS_H

#include "kvreuse_transport.h"

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
    _Atomic bool progress_stalled; /* kvt_fault_stall_progress */
    _Atomic uint32_t delay_ms;     /* kvt_fault_delay_completions */
    _Atomic uint64_t issue_limit;  /* kvt_fault_pause_issue: bytes of each operation the backend may issue */
} kvt_faults;

void kvt_faults_init(kvt_faults *faults);
/* Consumes a one-shot fault at `point` (the agent's lock held): its code, or KVT_OK. */
kvt_status kvt_fault_take_locked(kvt_faults *faults, uint32_t point);

#endif
