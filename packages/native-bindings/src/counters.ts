import { LibraryMismatchError } from './errors.js';
import { check, type NativeLibrary } from './library.js';
import { type StatusCodeName, statusCodeNames } from './status.js';

/** The native counters, in the library's order (KVT_COUNTER_*); `errors` follows them. */
const counterFields = [
  ['liveAgents', 'live_agents'],
  ['liveRegistrations', 'live_registrations'],
  ['registeredBytes', 'registered_bytes'],
  ['liveAllocations', 'live_allocations'],
  ['allocatedBytes', 'allocated_bytes'],
  ['livePeers', 'live_peers'],
  ['liveOperations', 'live_operations'],
  ['inflightOperations', 'inflight_operations'],
  ['operationsPosted', 'operations_posted'],
  ['bytesMoved', 'bytes_moved'],
  ['notificationsSent', 'notifications_sent'],
  ['notificationsReceived', 'notifications_received'],
  ['pendingNotifications', 'pending_notifications'],
  ['notificationsDropped', 'notifications_dropped'],
] as const;

/** The native counters that follow the error counters. */
const trailingCounterFields = [
  // UCX get/put requests and host-staged chunk requests issued (a get or put moves at most 1 MiB; direct copies and
  // loopback issue none), and the gets and puts in flight.
  ['requestsIssued', 'requests_issued'],
  ['inflightRequests', 'inflight_requests'],
  // Heartbeat probes this agent sent, probes of other agents it answered, peers reported unresponsive now,
  // and answers to its own probes received.
  ['heartbeatsSent', 'heartbeats_sent'],
  ['heartbeatsAnswered', 'heartbeats_answered'],
  ['unresponsivePeers', 'unresponsive_peers'],
  ['heartbeatAnswers', 'heartbeat_answers'],
  // Times readers of exported metadata were cut off before memory they could name went (UCX: the serving worker replaced).
  ['readerFences', 'reader_fences'],
  // Bytes this agent READ by copying a peer's file-backed region (Agent.register with `file`) that it mapped itself.
  ['fileReadBytes', 'file_read_bytes'],
  // Small READs of a same-host peer's allocated bank that the posting thread copied itself (at most 256 KiB in at most
  // 1,024 pieces, no notification): ended when post() returned, with no round trip through the progress thread.
  ['inlineOperations', 'inline_operations'],
  // Vram allocations of this agent's own that Agent.free took back while a reader in another process still had a
  // region of them open through CUDA IPC: their driver free waits until every such reader closed it or is gone.
  ['deferredVramFrees', 'deferred_vram_frees'],
  // Deregistrations of vram waiting now for the WRITEs that readers in other processes launched into it through CUDA
  // IPC before the withdrawal (each waits at most 1 s).
  ['withdrawalsAwaitingWrites', 'withdrawals_awaiting_writes'],
] as const;

type CounterField = (typeof counterFields)[number][0] | (typeof trailingCounterFields)[number][0];

/**
 * What the native library counts, for one agent or the whole process. Live figures go back to zero
 * when everything is closed; the others are cumulative. `liveAgents` is only counted process-wide.
 */
export type Counters = { readonly [K in CounterField]: number } & {
  /** Failed calls and failed operations, per status code. */
  readonly errors: { readonly [K in StatusCodeName]: number };
};

const COUNTER_COUNT = counterFields.length + statusCodeNames.length + trailingCounterFields.length;

/** Refuses a library whose counters are not the ones this facade names. */
export function checkCounterNames(library: NativeLibrary): void {
  const expected = [
    ...counterFields.map(([, native]) => native),
    ...statusCodeNames.map((code) => `errors.KVT_ERR_${code}`),
    ...trailingCounterFields.map(([, native]) => native),
  ];
  expected.forEach((name, index) => {
    const actual = library.api.kvt_counter_name(index);
    if (actual !== name) throw new LibraryMismatchError(library.path, `kvt_counter_name(${index})`, name, actual);
  });
}

/** Reads the counters of `agent`, or the process-wide ones for agent 0. */
export function readCounters(library: NativeLibrary, agent: number): Counters {
  const values = new BigUint64Array(COUNTER_COUNT);
  check(library, 'kvt_counters', library.api.kvt_counters(agent, values, COUNTER_COUNT, new Uint32Array(1)));
  const counters: Record<string, unknown> = {};
  counterFields.forEach(([field], index) => {
    counters[field] = Number(values[index]);
  });
  const errors: Record<string, number> = {};
  statusCodeNames.forEach((code, index) => {
    errors[code] = Number(values[counterFields.length + index]);
  });
  counters['errors'] = errors;
  trailingCounterFields.forEach(([field], index) => {
    counters[field] = Number(values[counterFields.length + statusCodeNames.length + index]);
  });
  return counters as Counters;
}
