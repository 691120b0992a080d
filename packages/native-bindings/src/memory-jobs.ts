import { check, type NativeLibrary, nativeError } from './library.js';
import { STATUS_IN_PROGRESS } from './status.js';

interface PendingJob {
  readonly id: bigint;
  /** The native operation the job does, e.g. `'kvt_mem_free'`, as its errors name it. */
  readonly call: string;
  readonly ended: (error?: unknown) => void;
}

/**
 * The memory work an agent hands to its own thread (backing an allocation's pages, deregistering,
 * freeing): each `kvt_mem_*_begin` call refuses at once or returns a job id; the thread writes a byte
 * to the wake-up pipe when a job ends, and `check()` (on every wake-up) settles the jobs whose outcome
 * `kvt_mem_job_status` then answers.
 */
export class MemoryJobs {
  readonly #library: NativeLibrary;
  readonly #agentId: number;
  readonly #onPendingChanged: () => void;
  /** Jobs begun and not yet settled, oldest first. */
  readonly #pending: PendingJob[] = [];

  /** `onPendingChanged` runs whenever a job begins or is settled. */
  constructor(library: NativeLibrary, agentId: number, onPendingChanged: () => void) {
    this.#library = library;
    this.#agentId = agentId;
    this.#onPendingChanged = onPendingChanged;
  }

  get hasPending(): boolean {
    return this.#pending.length > 0;
  }

  /**
   * Calls `begin` (a `kvt_mem_*_begin` call writing the job id into its argument). A refusal throws the
   * NativeTransportError naming `call`, with nothing begun; else the returned promise settles with the
   * job's outcome.
   */
  begin(call: string, begin: (outJob: BigUint64Array) => number): Promise<void> {
    const out = new BigUint64Array(1);
    const status = begin(out);
    if (status !== STATUS_IN_PROGRESS) check(this.#library, call, status);
    const ended = new Promise<void>((resolve, reject) => {
      this.#pending.push({
        id: out[0] ?? 0n,
        call,
        ended: (error) => (error === undefined ? resolve() : reject(error)),
      });
    });
    this.#onPendingChanged();
    this.check();
    return ended;
  }

  /** Settles every job whose outcome the agent's thread announced. */
  check(): void {
    if (this.#pending.length === 0) return;
    for (const job of [...this.#pending]) {
      const status = this.#library.api.kvt_mem_job_status(this.#agentId, job.id);
      if (status === STATUS_IN_PROGRESS) continue;
      this.#pending.splice(this.#pending.indexOf(job), 1);
      job.ended(status < 0 ? nativeError(this.#library, job.call, status) : undefined);
    }
    this.#onPendingChanged();
  }

  /**
   * After the agent's shutdown ended: its thread ran every job begun before the shutdown (it runs its
   * work in order), and jobs that can still be pending then (deregistrations, frees) always succeed.
   */
  settleAllDone(): void {
    for (const job of this.#pending.splice(0)) job.ended();
    this.#onPendingChanged();
  }
}
