import { check, type NativeLibrary, nativeError } from './library.js';
import { STATUS_IN_PROGRESS } from './status.js';

interface PendingJob {
  readonly id: bigint;
  /** The native operation the job does, e.g. `'kvt_mem_free'`, as its errors name it. */
  readonly call: string;
  /** Asks the job's outcome (answered once): `kvt_mem_job_status`, or `kvt_peer_load_status`. */
  readonly answer: (id: bigint) => number;
  /** What settles the job when the agent's shutdown ended before it was answered. */
  readonly atShutdown: JobAtShutdown;
  readonly ended: (error?: unknown) => void;
}

/**
 * What a job pending when its agent's shutdown ended came to: `'done'` for jobs that always succeed
 * once begun (deregistrations, frees), or the error a job whose result died with the agent rejects
 * with (a peer load: the peer went with the agent).
 */
export type JobAtShutdown = 'done' | (() => Error);

/** How a job is begun: its native call writes the job id into `outJob` (a `kvt_*_begin` call). */
export interface JobStart {
  readonly call: string;
  readonly begin: (outJob: BigUint64Array) => number;
  /** Default: `kvt_mem_job_status`. */
  readonly answer?: (id: bigint) => number;
  /** Default `'done'`. */
  readonly atShutdown?: JobAtShutdown;
}

/**
 * The work an agent hands to its own thread (backing an allocation's pages, deregistering, freeing,
 * loading a peer): each `kvt_*_begin` call refuses at once or returns a job id; the thread writes a
 * byte to the wake-up pipe when a job ends, and `check()` (on every wake-up) settles the jobs whose
 * outcome their status call then answers.
 */
export class AgentJobs {
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
   * Calls `begin`. A refusal throws the NativeTransportError naming `call`, with nothing begun; else
   * the returned promise settles with the job's outcome.
   */
  begin({ call, begin, answer, atShutdown = 'done' }: JobStart): Promise<void> {
    const out = new BigUint64Array(1);
    const status = begin(out);
    if (status !== STATUS_IN_PROGRESS) check(this.#library, call, status);
    const ask = answer ?? ((id: bigint) => this.#library.api.kvt_mem_job_status(this.#agentId, id));
    const ended = new Promise<void>((resolve, reject) => {
      this.#pending.push({
        id: out[0] ?? 0n,
        call,
        answer: ask,
        atShutdown,
        ended: (error) => (error === undefined ? resolve() : reject(error)),
      });
    });
    // No check here: the job's end writes its own byte to the wake-up pipe, and that wake-up settles it.
    this.#onPendingChanged();
    return ended;
  }

  /**
   * Settles every job whose outcome the agent's thread announced. The thread runs its jobs one at a time,
   * each to its end, in the order begun: the first job still in progress is where the ended ones stop.
   */
  check(): void {
    let ended = 0;
    for (const job of this.#pending) {
      const status = job.answer(job.id);
      if (status === STATUS_IN_PROGRESS) break;
      ended += 1;
      job.ended(status < 0 ? nativeError(this.#library, job.call, status) : undefined);
    }
    if (ended === 0) return;
    this.#pending.splice(0, ended);
    this.#onPendingChanged();
  }

  /**
   * After the agent's shutdown ended: its thread ran every job begun before the shutdown (it runs its
   * work in order). Jobs that always succeed once begun (deregistrations, frees) are done; the others
   * reject with the error they declared, their result gone with the agent.
   */
  settleAllDone(): void {
    for (const job of this.#pending.splice(0)) job.ended(job.atShutdown === 'done' ? undefined : job.atShutdown());
    this.#onPendingChanged();
  }
}
