import { type AgentContext, HandleState } from './handles.js';
import { check } from './library.js';

export type PeerState = 'ready' | 'invalidated' | 'disconnected';
const peerStates: readonly PeerState[] = ['ready', 'invalidated', 'disconnected'];

export interface PeerInfo {
  /** The peer's current generation in the native library (bumped by reloads and `invalidate()`). */
  readonly generation: bigint;
  readonly state: PeerState;
  /** How many regions the peer advertised. */
  readonly regionCount: number;
}

/**
 * A remote agent whose metadata was loaded. Operations and notifications name the generation the
 * peer had when it was (last) loaded: after `invalidate()` or a reload by someone else they are
 * refused with NOT_FOUND until the metadata is loaded again.
 */
export class Peer {
  readonly id: number;
  readonly #agent: AgentContext;
  readonly #state: HandleState;
  readonly #onUnload: (peer: Peer) => void;
  #generation: bigint;

  /** @internal Use agent.loadPeer. */
  constructor(agent: AgentContext, id: number, generation: bigint, onUnload: (peer: Peer) => void) {
    this.#agent = agent;
    this.id = id;
    this.#generation = generation;
    this.#onUnload = onUnload;
    this.#state = new HandleState(this, 'Peer', `${id} of agent ${agent.name}`);
  }

  /** The generation this handle uses for posts and notifications. */
  get generation(): bigint {
    return this.#generation;
  }

  get isOpen(): boolean {
    return this.#state.isOpen;
  }

  /** @internal A reload of the same peer's metadata. */
  reloaded(generation: bigint): void {
    this.#generation = generation;
  }

  /** @internal The agent was destroyed, which forgets its peers. */
  closedWithAgent(): void {
    this.#state.markClosed();
  }

  /** @internal */
  belongsTo(agent: AgentContext): boolean {
    return this.#agent === agent;
  }

  /** @internal */
  assertOpen(action: string): void {
    this.#state.assertOpen(action);
    this.#agent.assertOpen(action);
  }

  info(): PeerInfo {
    this.assertOpen('read peer info');
    const generation = new BigUint64Array(1);
    const state = new Uint32Array(1);
    const regionCount = new Uint32Array(1);
    check(
      this.#agent.library,
      'kvt_peer_info',
      this.#agent.library.api.kvt_peer_info(this.#agent.id, this.id, generation, state, regionCount),
    );
    return {
      generation: generation[0] ?? 0n,
      state: peerStates[state[0] ?? 0] ?? 'disconnected',
      regionCount: regionCount[0] ?? 0,
    };
  }

  /**
   * Bumps the peer's generation: every later post or notification through this handle is refused
   * with NOT_FOUND until the peer's metadata is loaded again. Operations already posted run to their end.
   */
  invalidate(): void {
    this.assertOpen('invalidate a peer');
    check(this.#agent.library, 'kvt_peer_invalidate', this.#agent.library.api.kvt_peer_invalidate(this.#agent.id, this.id));
  }

  /** Forgets the peer (closing its connection). Refused with BUSY while its operations are in progress. */
  unload(): void {
    this.assertOpen('unload a peer');
    check(this.#agent.library, 'kvt_peer_unload', this.#agent.library.api.kvt_peer_unload(this.#agent.id, this.id));
    this.#state.markClosed();
    this.#onUnload(this);
  }
}
