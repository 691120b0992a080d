import { type PerformanceEntry, PerformanceObserver, performance } from 'node:perf_hooks';

/** One synchronous call into the native library and how long it held the calling (JavaScript) thread. */
export interface BlockingCall {
  /** The native function, e.g. `'kvt_mem_register'`. */
  readonly call: string;
  /** Wall-clock time: what the JavaScript thread felt, preemption included. */
  readonly ms: number;
  /**
   * CPU time the thread spent in the call, for calls longer than the monitor's `cpuTimeAboveMs`: far
   * below `ms` means the thread waited or was preempted, close to it that the call itself worked. It
   * counts from a reading of the thread's usage taken at most 0.1 ms before the call, so it (and the
   * context switches below) may include up to 0.1 ms of what the thread did just before.
   */
  readonly cpuMs?: number;
  /**
   * For the same calls: how often the thread was preempted during the call (involuntary context
   * switches: runnable, but another thread had the core). Wall time far above CPU time with
   * preemptions and no `blocked` means the thread waited for a core, not for the library.
   */
  readonly preempted?: number;
  /**
   * For the same calls: how often the thread blocked during the call (voluntary context switches: a lock
   * held by another thread, a condition, a system call that slept).
   */
  readonly blocked?: number;
  /**
   * For the same calls: how long the thread waited for a core during the call (runnable, after a
   * preemption or a wake-up: the kernel's run-queue delay), when the kernel reports it.
   */
  readonly waitedMs?: number;
  /**
   * How long the call itself kept the thread: working, or asleep on a lock or another thread. For a call
   * whose usage was read: one that never blocked held it for its CPU time (the rest of its wall-clock time
   * the core ran something else, or the virtual CPU did not run); one that blocked, for its wall-clock
   * time less its wait for a core (`waitedMs`). Otherwise `ms`.
   */
  readonly heldMs: number;
  /**
   * For the same calls: the part of the call V8 spent collecting garbage, as Node reports its collections
   * ('gc' performance entries, a turn of the event loop after they ran; incremental marking steps are not
   * reported). Absent when no collection overlapped the call.
   */
  readonly gcMs?: number;
}

/**
 * `"kvt_xfer_post 7.10 ms wall, 0.40 ms cpu, preempted 2×, blocked 0×, waited 6.50 ms for a core, 0.30 ms gc"`
 * (without the parts that were not read).
 */
export function describeBlockingCall({
  call,
  ms,
  cpuMs,
  preempted,
  blocked,
  waitedMs,
  gcMs,
}: Omit<BlockingCall, 'heldMs'>): string {
  const cpu = cpuMs === undefined ? '' : `, ${cpuMs.toFixed(2)} ms cpu`;
  const switches = preempted === undefined ? '' : `, preempted ${preempted}×, blocked ${blocked ?? 0}×`;
  const waited = waitedMs === undefined ? '' : `, waited ${waitedMs.toFixed(2)} ms for a core`;
  return `${call} ${ms.toFixed(2)} ms wall${cpu}${switches}${waited}${gcMs === undefined ? '' : `, ${gcMs.toFixed(2)} ms gc`}`;
}

/** What the thread did during a long call (kvt_thread_usage read around it). */
interface ThreadUsage {
  readonly cpuMs: number;
  readonly preempted: number;
  readonly blocked: number;
  readonly waitedMs: number | undefined;
}

/** One reading of kvt_thread_usage: the thread's CPU time and its context switches so far. */
interface ThreadUsageReading {
  readonly cpuNs: number;
  readonly blocked: number;
  readonly preempted: number;
  /** Time spent waiting for a core so far; undefined when the kernel does not report it. */
  readonly waitedNs: number | undefined;
}

export interface BlockingCallMonitorOptions {
  /**
   * Calls longer than this (wall-clock) also get their CPU time and context switches read (`cpuMs`,
   * `preempted`, `blocked`). Default 1 ms.
   */
  readonly cpuTimeAboveMs?: number;
}

/** BlockingCall.heldMs; never above `ms` nor below 0, as the usage reading before may be up to 0.1 ms old. */
function heldMs(ms: number, usage: ThreadUsage | undefined): number {
  if (usage === undefined) return ms;
  return Math.max(0, Math.min(ms, usage.blocked === 0 ? usage.cpuMs : ms - (usage.waitedMs ?? 0)));
}

/** A call a monitor keeps; long enough to be looked into, it collects the garbage collections during it. */
class RecordedCall implements BlockingCall {
  readonly call: string;
  readonly ms: number;
  readonly cpuMs?: number;
  readonly preempted?: number;
  readonly blocked?: number;
  readonly waitedMs?: number;
  readonly heldMs: number;
  gcMs?: number;
  /** performance.now() at the call's start. */
  readonly #start: number;

  constructor(call: string, ms: number, start: number, usage: ThreadUsage | undefined) {
    this.call = call;
    this.ms = ms;
    this.#start = start;
    if (usage !== undefined) {
      this.cpuMs = usage.cpuMs;
      this.preempted = usage.preempted;
      this.blocked = usage.blocked;
      if (usage.waitedMs !== undefined) this.waitedMs = usage.waitedMs;
    }
    this.heldMs = heldMs(ms, usage);
  }

  attribute(collection: PerformanceEntry): void {
    const end = Math.min(this.#start + this.ms, collection.startTime + collection.duration);
    const overlap = end - Math.max(this.#start, collection.startTime);
    if (overlap > 0) this.gcMs = (this.gcMs ?? 0) + overlap;
  }
}

type NativeFunction = (...args: never[]) => unknown;
/** A library's bound functions: `api` is what the facade calls through, `raw` the functions koffi bound. */
interface BoundApi {
  readonly api: Record<string, unknown>;
  readonly raw: Readonly<Record<string, unknown>>;
}

const bound = new Set<BoundApi>();
const running = new Set<BlockingCallMonitor>();
/** The library's kvt_thread_usage (CPU time, context switches of the calling thread), once one is bound. */
let threadUsage: ((values: BigUint64Array, capacity: number) => number) | undefined;
/** kvt_thread_usage's four values, read as 32-bit halves: no BigInt per call. */
const usageValues = new BigUint64Array(4);
const usageWords = new Uint32Array(usageValues.buffer);
/** Node's reports of V8's garbage collections, observed while any monitor runs. */
let collections: PerformanceObserver | undefined;

function attributeCollections(entries: readonly PerformanceEntry[], monitors: Iterable<BlockingCallMonitor>): void {
  for (const monitor of monitors) for (const entry of entries) monitor.attribute(entry);
}

/**
 * Records the longest synchronous native call made while it runs (e.g. across a benchmark). While no
 * monitor runs, the facade calls the bound functions directly: monitoring costs nothing when off.
 */
export class BlockingCallMonitor {
  #longest: RecordedCall | undefined;
  #longestHeld: RecordedCall | undefined;
  #calls = 0;
  readonly #longestByCall = new Map<string, RecordedCall>();
  /** @internal */
  readonly cpuTimeAboveMs: number;

  /** @internal use monitorBlockingCalls() */
  constructor(cpuTimeAboveMs = 1) {
    this.cpuTimeAboveMs = cpuTimeAboveMs;
  }

  /** The longest call seen so far, or undefined before the first. */
  get longest(): BlockingCall | undefined {
    return this.#longest;
  }

  /**
   * The call that held the thread longest so far (`heldMs`: working or blocked, not waiting for a core),
   * or undefined before the first: where `longest` was preempted, this is the longest the library itself
   * kept the thread.
   */
  get longestHeld(): BlockingCall | undefined {
    return this.#longestHeld;
  }

  /** How many calls were seen. */
  get calls(): number {
    return this.#calls;
  }

  /** The `count` native functions with the longest calls, longest first (each with its longest call). */
  slowest(count: number): BlockingCall[] {
    return [...this.#longestByCall.values()].sort((a, b) => b.ms - a.ms).slice(0, count);
  }

  get isRunning(): boolean {
    return running.has(this);
  }

  /** @internal */
  record(call: string, ms: number, start: number, usage: ThreadUsage | undefined): void {
    this.#calls++;
    const longestOfCall = ms > (this.#longestByCall.get(call)?.ms ?? -1);
    const read = ms > this.cpuTimeAboveMs ? usage : undefined;
    const longestHeld = heldMs(ms, read) > (this.#longestHeld?.heldMs ?? -1);
    if (!longestOfCall && !longestHeld) return; // the common case, which allocates nothing
    const seen = new RecordedCall(call, ms, start, read);
    if (longestHeld) this.#longestHeld = seen;
    if (!longestOfCall) return;
    if (this.#longest === undefined || ms > this.#longest.ms) this.#longest = seen;
    this.#longestByCall.set(call, seen);
  }

  /** @internal Adds a collection to the kept calls it overlapped (the longest is the longest of its function). */
  attribute(collection: PerformanceEntry): void {
    const held = this.#longestHeld;
    const kept = held === undefined || this.#longestByCall.get(held.call) === held ? [] : [held];
    for (const call of [...this.#longestByCall.values(), ...kept])
      if (call.ms > this.cpuTimeAboveMs) call.attribute(collection);
  }

  /**
   * Stops recording (what was recorded stays readable; collections Node has not reported yet are not
   * added). Stopping a stopped monitor does nothing.
   */
  stop(): void {
    if (!running.has(this)) return;
    if (collections !== undefined) attributeCollections(collections.takeRecords(), running);
    running.delete(this);
    if (running.size > 0) return;
    for (const target of bound) Object.assign(target.api, target.raw);
    collections?.disconnect();
    collections = undefined;
  }
}

/** Starts a monitor of every synchronous native call, of libraries loaded before and after. */
export function monitorBlockingCalls(options: BlockingCallMonitorOptions = {}): BlockingCallMonitor {
  const monitor = new BlockingCallMonitor(options.cpuTimeAboveMs);
  running.add(monitor);
  if (running.size === 1) {
    for (const target of bound) instrument(target);
    collections = new PerformanceObserver((list) => attributeCollections(list.getEntries(), running));
    collections.observe({ type: 'gc' });
  }
  return monitor;
}

/** @internal library.ts: routes `api`'s calls through the monitors while any runs. */
export function registerApi(api: Record<string, unknown>, raw: Readonly<Record<string, unknown>>): void {
  const target = { api, raw };
  if (typeof raw.kvt_thread_usage === 'function')
    threadUsage ??= raw.kvt_thread_usage as (values: BigUint64Array, capacity: number) => number;
  bound.add(target);
  if (running.size > 0) instrument(target);
}

/** The thread's usage now (kvt_thread_usage); undefined when no library is bound or the kernel did not answer. */
function readUsage(): ThreadUsageReading | undefined {
  if (threadUsage === undefined || threadUsage(usageValues, 4) !== 0) return undefined;
  const unknownWait = usageWords[6] === 0xffff_ffff && usageWords[7] === 0xffff_ffff; // UINT64_MAX
  return {
    cpuNs: usageValue(0),
    blocked: usageValue(1),
    preempted: usageValue(2),
    waitedNs: unknownWait ? undefined : usageValue(3),
  };
}

function usageValue(index: number): number {
  return (usageWords[2 * index] ?? 0) + (usageWords[2 * index + 1] ?? 0) * 2 ** 32;
}

/**
 * How old the usage reading a call starts from may be, in ms. Reading the thread's usage is a system call
 * (about 1 µs on a virtual machine), several times the cost of the short calls a posted operation makes;
 * a reading this recent stands in for one at the call's start, off by at most this much of the thread's time.
 */
const USAGE_READING_MAX_AGE_MS = 0.1;
/** The thread's last usage reading and when it was taken (performance.now()). */
let lastReading: ThreadUsageReading | undefined;
let lastReadingAt = Number.NEGATIVE_INFINITY;

/** The thread's usage at `now` (performance.now()), or a reading at most USAGE_READING_MAX_AGE_MS older. */
function recentUsage(now: number): ThreadUsageReading | undefined {
  if (now - lastReadingAt > USAGE_READING_MAX_AGE_MS) {
    lastReading = readUsage();
    lastReadingAt = now;
  }
  return lastReading;
}

function someMonitorWantsCpu(ms: number): boolean {
  for (const monitor of running) if (ms > monitor.cpuTimeAboveMs) return true;
  return false;
}

function instrument(target: BoundApi): void {
  for (const [name, call] of Object.entries(target.raw)) {
    const native = call as NativeFunction;
    target.api[name] = (...args: never[]) => {
      // The thread's usage is read before a call unless a recent reading stands in for it, and after it only
      // when the call was long enough for some monitor to want it, so that short calls stay cheap.
      const start = performance.now();
      const before = recentUsage(start);
      try {
        return native(...args);
      } finally {
        const end = performance.now();
        const ms = end - start;
        const after = before !== undefined && someMonitorWantsCpu(ms) ? readUsage() : undefined;
        if (after !== undefined) {
          lastReading = after;
          lastReadingAt = end;
        }
        const usage =
          before === undefined || after === undefined
            ? undefined
            : {
                cpuMs: (after.cpuNs - before.cpuNs) / 1e6,
                blocked: after.blocked - before.blocked,
                preempted: after.preempted - before.preempted,
                waitedMs:
                  after.waitedNs === undefined || before.waitedNs === undefined
                    ? undefined
                    : (after.waitedNs - before.waitedNs) / 1e6,
              };
        for (const monitor of running) monitor.record(name, ms, start, usage);
      }
    };
  }
}
