import { performance } from 'node:perf_hooks';

/** One synchronous call into the native library and how long it held the calling (JavaScript) thread. */
export interface BlockingCall {
  /** The native function, e.g. `'kvt_mem_register'`. */
  readonly call: string;
  /** Wall-clock time: what the JavaScript thread felt, preemption included. */
  readonly ms: number;
  /**
   * CPU time the thread spent in the call, for calls longer than the monitor's `cpuTimeAboveMs`: far
   * below `ms` means the thread waited or was preempted, close to it that the call itself worked.
   */
  readonly cpuMs?: number;
}

/** `"kvt_xfer_post 7.10 ms wall, 0.40 ms cpu"` (without the cpu part when it was not read). */
export function describeBlockingCall({ call, ms, cpuMs }: BlockingCall): string {
  return `${call} ${ms.toFixed(2)} ms wall${cpuMs === undefined ? '' : `, ${cpuMs.toFixed(2)} ms cpu`}`;
}

export interface BlockingCallMonitorOptions {
  /** Calls longer than this (wall-clock) also get their CPU time read (`cpuMs`). Default 1 ms. */
  readonly cpuTimeAboveMs?: number;
}

type NativeFunction = (...args: never[]) => unknown;
/** A library's bound functions: `api` is what the facade calls through, `raw` the functions koffi bound. */
interface BoundApi {
  readonly api: Record<string, unknown>;
  readonly raw: Readonly<Record<string, unknown>>;
}

const bound = new Set<BoundApi>();
const running = new Set<BlockingCallMonitor>();
/** The calling thread's CPU time in ns (the library's kvt_thread_cpu_ns), once a library is bound. */
let threadCpuNs: (() => number | bigint) | undefined;

/**
 * Records the longest synchronous native call made while it runs (e.g. across a benchmark). While no
 * monitor runs, the facade calls the bound functions directly: monitoring costs nothing when off.
 */
export class BlockingCallMonitor {
  #longest: BlockingCall | undefined;
  #calls = 0;
  readonly #longestByCall = new Map<string, BlockingCall>();
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
  record(call: string, ms: number, cpuMs: number | undefined): void {
    this.#calls++;
    const seen: BlockingCall = cpuMs === undefined || ms <= this.cpuTimeAboveMs ? { call, ms } : { call, ms, cpuMs };
    if (this.#longest === undefined || ms > this.#longest.ms) this.#longest = seen;
    if (ms > (this.#longestByCall.get(call)?.ms ?? -1)) this.#longestByCall.set(call, seen);
  }

  /** Stops recording (what was recorded stays readable). Stopping a stopped monitor does nothing. */
  stop(): void {
    if (!running.delete(this)) return;
    if (running.size === 0) for (const target of bound) Object.assign(target.api, target.raw);
  }
}

/** Starts a monitor of every synchronous native call, of libraries loaded before and after. */
export function monitorBlockingCalls(options: BlockingCallMonitorOptions = {}): BlockingCallMonitor {
  const monitor = new BlockingCallMonitor(options.cpuTimeAboveMs);
  running.add(monitor);
  if (running.size === 1) for (const target of bound) instrument(target);
  return monitor;
}

/** @internal library.ts: routes `api`'s calls through the monitors while any runs. */
export function registerApi(api: Record<string, unknown>, raw: Readonly<Record<string, unknown>>): void {
  const target = { api, raw };
  if (typeof raw.kvt_thread_cpu_ns === 'function') threadCpuNs ??= raw.kvt_thread_cpu_ns as () => number | bigint;
  bound.add(target);
  if (running.size > 0) instrument(target);
}

function cpuNs(): number | undefined {
  return threadCpuNs === undefined ? undefined : Number(threadCpuNs());
}

function someMonitorWantsCpu(ms: number): boolean {
  for (const monitor of running) if (ms > monitor.cpuTimeAboveMs) return true;
  return false;
}

function instrument(target: BoundApi): void {
  for (const [name, call] of Object.entries(target.raw)) {
    const native = call as NativeFunction;
    target.api[name] = (...args: never[]) => {
      // The CPU clock is read before every call (one system call) but after it only when the call was
      // long enough for some monitor to want it, so that short calls stay cheap.
      const cpuStart = cpuNs();
      const start = performance.now();
      try {
        return native(...args);
      } finally {
        const ms = performance.now() - start;
        const cpuEnd = cpuStart !== undefined && someMonitorWantsCpu(ms) ? cpuNs() : undefined;
        const cpuMs = cpuStart === undefined || cpuEnd === undefined ? undefined : (cpuEnd - cpuStart) / 1e6;
        for (const monitor of running) monitor.record(name, ms, cpuMs);
      }
    };
  }
}
