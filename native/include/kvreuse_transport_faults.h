/* libkvreuse_transport: fault injection, for tests of what is built on the library. Part of
 * kvreuse_transport.h, which includes it; include that header. */
#ifndef KVREUSE_TRANSPORT_FAULTS_H
#define KVREUSE_TRANSPORT_FAULTS_H

#ifndef KVREUSE_TRANSPORT_H
#error "kvreuse_transport_faults.h is part of kvreuse_transport.h: include that header"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Fault injection (off unless switched on here; per agent)                                         */
/* ---------------------------------------------------------------------------------------------- */

enum {
    KVT_FAULT_REGISTER = 0,   /* kvt_mem_register fails before mapping anything */
    KVT_FAULT_POST = 1,       /* kvt_xfer_post / kvt_xfer_post_blocks fail after validation, before any byte moves */
    KVT_FAULT_COMPLETION = 2, /* an operation moves its bytes, then ends with the code instead of KVT_OK */
    KVT_FAULT_ALLOCATION = 3, /* kvt_xfer_post / kvt_xfer_post_blocks cannot allocate the operation's record (as if
                                 out of memory) */
};

/**
 * Arms a one-shot fault: the `nth` (1 = the next) call of `point` on this agent, counted from now,
 * fails with `code` (a KVT_ERR_*). Re-arming a point replaces its previous setting.
 */
KVT_API kvt_status kvt_fault_fail(uint32_t agent, uint32_t point, uint32_t nth, kvt_status code);

/** Keeps the operation in progress until KVT_DELAY_FOREVER is cleared (kvt_fault_clear). */
#define KVT_DELAY_FOREVER UINT32_MAX
/**
 * Delays every completion of this agent's operations by `ms` after the backend finished (the
 * operation stays KVT_IN_PROGRESS meanwhile; its bytes have moved). KVT_DELAY_FOREVER holds them
 * until the delay is changed or cleared. Changing the delay applies to operations already held.
 * Cancelling a held operation ends it at once with KVT_ERR_CANCELED (the backend is already done).
 */
KVT_API kvt_status kvt_fault_delay_completions(uint32_t agent, uint32_t ms);

/** No pause of issuing: the default, and what kvt_fault_clear restores. */
#define KVT_ISSUE_UNLIMITED UINT64_MAX
/**
 * UCX backend: issues at most `bytes` of each of this agent's operations (rounded up to the end of the
 * request that reaches it), then holds the rest back until the limit is raised or cleared. The bytes
 * issued complete as usual, so a test can have part of a batch moved and the rest not yet issued, and
 * then stop the peer before the rest goes out. The loopback backend ignores it.
 */
KVT_API kvt_status kvt_fault_pause_issue(uint32_t agent, uint64_t bytes);

/**
 * Stalls the agent's progress thread (`stalled` 1) as a stopped process would be: it runs no command,
 * no backend progress and no operation, and answers no probe, until called with 0, kvt_fault_clear, or
 * kvt_agent_destroy (which resumes it). Stalling returns once the thread is in the stall (or a shutdown
 * began): a command queued after it waits for the stall's end. Calls that wait for the progress thread
 * (peer load, registration on UCX) wait meanwhile. The loopback heartbeat tests use it to make a peer
 * unresponsive.
 */
KVT_API kvt_status kvt_fault_stall_progress(uint32_t agent, uint32_t stalled);

/**
 * Takes the agent's heartbeat off its clock: from this call until kvt_fault_clear, it starts no probe round of
 * its own (neither on its interval nor when probing would start), only the `rounds` asked here (0: none, only
 * the switch). Each round is the one its interval would have run: it probes the peers with operations in
 * flight or watched and counts a miss for each one still awaiting an answer, reporting it as usual. Returns
 * once the rounds ran (or a shutdown began), so a test orders probes, answers and reports itself.
 * KVT_ERR_NOT_ALLOWED while the agent's own progress thread is stalled (kvt_fault_stall_progress): no round
 * would run.
 */
KVT_API kvt_status kvt_fault_heartbeat_rounds(uint32_t agent, uint32_t rounds);

/** Disarms every fault, delay, issue pause and stall of the agent and puts its heartbeat back on its clock;
 * held operations complete promptly. */
KVT_API kvt_status kvt_fault_clear(uint32_t agent);

#ifdef __cplusplus
}
#endif

#endif /* KVREUSE_TRANSPORT_FAULTS_H */
