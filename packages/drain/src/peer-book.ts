import { InvalidDrainOptionError, PeerFencedError, PeerUnhealthyError } from './errors.js';
import { checkFunction, checkNonEmptyString, checkOptionsObject } from './options.js';

/** The part of a native peer (`Peer` of `@kvreuse/native-bindings`) the book reads and invalidates. */
export interface TrackedPeer {
  readonly id: number;
  /** The generation the handle posts with; bumped when its metadata is reloaded. */
  readonly generation: bigint;
  info?(): { readonly state: 'ready' | 'invalidated' | 'disconnected' };
  invalidate?(): void;
  readonly isOpen?: boolean;
}

/**
 * Who work was prepared for: a peer's name (its agent name), the incarnation of the process behind it
 * and the generation of its metadata at the time. `PeerBook.ticket` hands these out.
 */
export interface PeerTicket {
  readonly name: string;
  readonly incarnation: string;
  readonly generation: bigint;
}

export type PeerHealth =
  { readonly healthy: true } | { readonly healthy: false; readonly reason: string; readonly since: number };

interface PeerRecord {
  readonly peer: TrackedPeer;
  incarnation: string;
  health: PeerHealth;
}

const HEALTHY: PeerHealth = { healthy: true };

/**
 * Fencing and health of the peers an agent talks to. A peer is its name plus an incarnation: a
 * restarted process is a new peer, and a ticket issued for the old incarnation (or an older metadata
 * generation) is refused with `PeerFencedError`, never redirected. A peer that disconnected or timed
 * out is unhealthy (`PeerUnhealthyError`) until its metadata is loaded again.
 */
export class PeerBook {
  readonly #records = new Map<string, PeerRecord>();
  readonly #now: () => number;

  constructor(now: () => number = () => performance.now()) {
    checkFunction('now', now);
    this.#now = now;
  }

  /**
   * Records the peer after its metadata was loaded (or reloaded): the incarnation it announced, and
   * health reset to healthy. A different incarnation under the same name fences every earlier ticket.
   */
  track(name: string, incarnation: string, peer: TrackedPeer): PeerTicket {
    checkNonEmptyString('peer name', name);
    checkNonEmptyString(`incarnation of peer ${name}`, incarnation);
    checkOptionsObject(`peer ${name}`, peer);
    if (typeof peer.generation !== 'bigint')
      throw new InvalidDrainOptionError(`peer ${name}.generation`, peer.generation, 'must be a bigint (a native Peer)');
    const known = this.#records.get(name);
    if (known !== undefined && known.peer === peer) {
      known.incarnation = incarnation;
      known.health = HEALTHY;
    } else {
      this.#records.set(name, { peer, incarnation, health: HEALTHY });
    }
    return this.ticket(name);
  }

  /** The ticket work for this peer must carry now. */
  ticket(name: string): PeerTicket {
    const record = this.#record(name);
    return { name, incarnation: record.incarnation, generation: record.peer.generation };
  }

  /** The native handle of a tracked peer. */
  peer(name: string): TrackedPeer {
    return this.#record(name).peer;
  }

  health(name: string): PeerHealth {
    return this.#record(name).health;
  }

  /** Every tracked peer's name. */
  names(): string[] {
    return [...this.#records.keys()];
  }

  /**
   * Refuses a ticket whose peer is unknown, restarted (incarnation), reloaded or invalidated since
   * (generation), or unhealthy. Returns the native handle to post with.
   */
  admit(ticket: PeerTicket): TrackedPeer {
    checkOptionsObject('ticket', ticket);
    const record = this.#records.get(ticket.name);
    if (record === undefined) throw new PeerFencedError(ticket.name, 'tracking', ticket.incarnation, 'not tracked');
    if (record.incarnation !== ticket.incarnation) {
      throw new PeerFencedError(ticket.name, 'incarnation', ticket.incarnation, record.incarnation);
    }
    if (record.peer.generation !== ticket.generation) {
      throw new PeerFencedError(ticket.name, 'generation', ticket.generation, record.peer.generation);
    }
    if (!record.health.healthy) throw new PeerUnhealthyError(ticket.name, record.health.reason);
    return record.peer;
  }

  /**
   * Forgets the peer tracked under `name` once its native handle `peer` was unloaded: its tickets are fenced
   * as not tracked from then on. Does nothing if `name` now tracks another handle, or nothing.
   */
  forget(name: string, peer: TrackedPeer): void {
    if (this.#records.get(name)?.peer === peer) this.#records.delete(name);
  }

  /**
   * Marks the peer unhealthy (first reason kept) until it is tracked again. Unknown names are ignored;
   * a reason that is not a non-empty string is refused.
   */
  markUnhealthy(name: string, reason: string): void {
    checkNonEmptyString('reason', reason);
    const record = this.#records.get(name);
    if (record === undefined || !record.health.healthy) return;
    record.health = { healthy: false, reason, since: this.#now() };
  }

  /**
   * Asks the native layer how the peer is (where the handle can say): a disconnected peer is marked
   * unhealthy. Returns the native state, or `undefined` when it cannot be probed.
   */
  probe(name: string): 'ready' | 'invalidated' | 'disconnected' | undefined {
    const record = this.#records.get(name);
    if (record?.peer.info === undefined || record.peer.isOpen === false) return undefined;
    const { state } = record.peer.info();
    if (state === 'disconnected') this.markUnhealthy(name, 'the native layer reports it disconnected');
    return state;
  }

  /** Invalidates every tracked peer natively (bumping its generation), so nothing more is posted to any. */
  invalidateAll(): string[] {
    const invalidated: string[] = [];
    for (const [name, record] of this.#records) {
      if (record.peer.invalidate === undefined || record.peer.isOpen === false) continue;
      record.peer.invalidate();
      record.health = { healthy: false, reason: 'invalidated by shutdown', since: this.#now() };
      invalidated.push(name);
    }
    return invalidated;
  }

  #record(name: string): PeerRecord {
    const record = this.#records.get(name);
    if (record === undefined) throw new PeerFencedError(name, 'tracking', name, 'not tracked');
    return record;
  }
}
