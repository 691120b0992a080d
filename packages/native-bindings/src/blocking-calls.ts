import { performance } from 'node:perf_hooks';

/** One synchronous call into the native library and how long it held the calling (JavaScript) thread. */
export interface BlockingCall {
  /** The native function, e.g. `'kvt_mem_register'`. */
  readonly call: string;
  readonly ms: number;
}

type NativeFunction = (...args: never[]) => unknown;
/** A library's bound functions: `api` is what the facade calls through, `raw` the functions koffi bound. */
interface BoundApi {
  readonly api: Record<string, unknown>;
  readonly raw: Readonly<Record<string, unknown>>;
}

const bound = new Set<BoundApi>();
const running = new Set<BlockingCallMonitor>();

/**
 * Records the longest synchronous native call made while it runs (e.g. across a benchmark). While no
 * monitor runs, the facade calls the bound functions directly: monitoring costs nothing when off.
 */
export class BlockingCallMonitor {
  #longest: BlockingCall | undefined;
  #calls = 0;
  readonly #longestByCall = new Map<string, number>();

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
    return [...this.#longestByCall]
      .map(([call, ms]) => ({ call, ms }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, count);
  }

  get isRunning(): boolean {
    return running.has(this);
  }

  /** @internal */
  record(call: string, ms: number): void {
    this.#calls++;
    if (this.#longest === undefined || ms > this.#longest.ms) this.#longest = { call, ms };
    if (ms > (this.#longestByCall.get(call) ?? -1)) this.#longestByCall.set(call, ms);
  }

  /** Stops recording (what was recorded stays readable). Stopping a stopped monitor does nothing. */
  stop(): void {
    if (!running.delete(this)) return;
    if (running.size === 0) for (const target of bound) Object.assign(target.api, target.raw);
  }
}

/** Starts a monitor of every synchronous native call, of libraries loaded before and after. */
export function monitorBlockingCalls(): BlockingCallMonitor {
  const monitor = new BlockingCallMonitor();
  running.add(monitor);
  if (running.size === 1) for (const target of bound) instrument(target);
  return monitor;
}

/** @internal library.ts: routes `api`'s calls through the monitors while any runs. */
export function registerApi(api: Record<string, unknown>, raw: Readonly<Record<string, unknown>>): void {
  const target = { api, raw };
  bound.add(target);
  if (running.size > 0) instrument(target);
}

function instrument(target: BoundApi): void {
  for (const [name, call] of Object.entries(target.raw)) {
    const native = call as NativeFunction;
    target.api[name] = (...args: never[]) => {
      const start = performance.now();
      try {
        return native(...args);
      } finally {
        const ms = performance.now() - start;
        for (const monitor of running) monitor.record(name, ms);
      }
    };
  }
}
