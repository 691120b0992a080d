import { InvalidArgumentError } from './errors.js';
import type { AgentContext } from './handles.js';
import { check } from './library.js';
import { isStatusCodeName, type StatusCodeName, statusOf } from './status.js';

/** Where a one-shot fault strikes: a registration, a post (after validation), or a completion (after the bytes moved). */
export type FaultPoint = 'register' | 'post' | 'completion';
const faultPointIds: { readonly [P in FaultPoint]: number } = { register: 0, post: 1, completion: 2 };
const DELAY_FOREVER = 0xffff_ffff;

/** Fault injection for one agent; off until one of these is called. */
export class Faults {
  readonly #agent: AgentContext;

  /** @internal Use agent.faults. */
  constructor(agent: AgentContext) {
    this.#agent = agent;
  }

  /** The `nth` (1 = next) call at `point`, counted from now, fails with `code`. Re-arming a point replaces it. */
  failNth(point: FaultPoint, nth: number, code: StatusCodeName): void {
    this.#agent.assertOpen('arm a fault');
    if (!Object.hasOwn(faultPointIds, point)) {
      throw new InvalidArgumentError('point', point, `must be one of ${Object.keys(faultPointIds).join(', ')}`);
    }
    if (!Number.isInteger(nth) || nth < 1 || nth > 0xffff_ffff)
      throw new InvalidArgumentError('nth', nth, 'must be an integer ≥ 1');
    if (!isStatusCodeName(code))
      throw new InvalidArgumentError('code', code, 'must be a status code name such as BUSY');
    const { library, id } = this.#agent;
    check(library, 'kvt_fault_fail', library.api.kvt_fault_fail(id, faultPointIds[point], nth, statusOf(code)));
  }

  /**
   * Holds every completion of this agent's operations for `ms` after their bytes moved (they stay in
   * progress meanwhile), or until `clear()` for `'forever'`. Applies to operations already held.
   */
  delayCompletions(ms: number | 'forever'): void {
    this.#agent.assertOpen('delay completions');
    if (ms !== 'forever' && (!Number.isInteger(ms) || ms < 0 || ms >= DELAY_FOREVER)) {
      throw new InvalidArgumentError('ms', ms, `must be an integer in [0, ${DELAY_FOREVER}) or 'forever'`);
    }
    const { library, id } = this.#agent;
    check(
      library,
      'kvt_fault_delay_completions',
      library.api.kvt_fault_delay_completions(id, ms === 'forever' ? DELAY_FOREVER : ms),
    );
  }

  /**
   * Stalls this agent's progress thread (`true`) as a stopped process would be: it answers no heartbeat
   * probe and moves nothing until `stallProgress(false)`, `clear()` or `close()`. Returns once the thread is
   * in the stall. Calls that need the progress thread (loading a peer, registering on UCX) wait meanwhile;
   * a notification sent over UCX waits in its queue.
   */
  stallProgress(stalled: boolean): void {
    this.#agent.assertOpen('stall progress');
    if (typeof stalled !== 'boolean') throw new InvalidArgumentError('stalled', stalled, 'must be a boolean');
    const { library, id } = this.#agent;
    check(library, 'kvt_fault_stall_progress', library.api.kvt_fault_stall_progress(id, stalled ? 1 : 0));
  }

  /**
   * Takes this agent's heartbeat off its clock and runs `rounds` probe rounds now (0: none): until `clear()`,
   * it probes its peers and counts their misses only in the rounds asked here, each one the round its interval
   * would have run, and returns once they ran. A test so orders probes, answers and `peer-unresponsive`
   * reports itself: after an answered probe, the first round probes afresh and each later one counts a miss.
   * Refused (NOT_ALLOWED) while this agent's own progress is stalled.
   */
  runHeartbeatRounds(rounds: number): void {
    this.#agent.assertOpen('run heartbeat rounds');
    if (!Number.isInteger(rounds) || rounds < 0 || rounds > 0xffff_ffff)
      throw new InvalidArgumentError('rounds', rounds, 'must be an integer ≥ 0');
    const { library, id } = this.#agent;
    check(library, 'kvt_fault_heartbeat_rounds', library.api.kvt_fault_heartbeat_rounds(id, rounds));
  }

  /** Disarms every fault, delay and stall, and puts the heartbeat back on its clock; held operations complete promptly. */
  clear(): void {
    this.#agent.assertOpen('clear faults');
    const { library, id } = this.#agent;
    check(library, 'kvt_fault_clear', library.api.kvt_fault_clear(id));
  }
}
