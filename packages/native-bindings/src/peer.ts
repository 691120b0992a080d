import { InvalidArgumentError } from './errors.js';
import { type AgentContext, HandleState } from './handles.js';
import { check } from './library.js';
import { type MemoryKind, memoryKinds } from './memory.js';

export type PeerState = 'ready' | 'invalidated' | 'disconnected';
const peerStates: readonly PeerState[] = ['ready', 'invalidated', 'disconnected'];

export interface PeerInfo {
  /** The peer's current generation in the native library (bumped by reloads and `invalidate()`). */
  readonly generation: bigint;
  readonly state: PeerState;
  /** How many regions the peer advertised. */
  readonly regionCount: number;
}

/** A region a peer advertises: what descriptors' remote region tables name by `id`. */
export interface PeerRegion {
  readonly id: number;
  readonly address: bigint;
  readonly bytes: number;
  readonly kind: MemoryKind;
  readonly device: number;
}

const TRANSPORT_TEXT_BYTES = 4096;
const MAX_NAME = 255;

/**
 * A remote agent whose metadata was loaded. Operations and notifications name the generation the
 * peer had when it was (last) loaded: after `invalidate()` or a reload by someone else they are
 * refused with NOT_FOUND until the metadata is loaded again.
 */
export class Peer {
  readonly id: number;
  /** The peer agent's name (from its metadata). */
  readonly name: string;
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
    const name = Buffer.alloc(MAX_NAME + 1);
    check(agent.library, 'kvt_peer_name', agent.library.api.kvt_peer_name(agent.id, id, name, name.length));
    this.name = name.toString('latin1', 0, name.indexOf(0));
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

  /** The regions the peer advertises, in its metadata's order (none once it is invalidated). */
  regions(): PeerRegion[] {
    this.assertOpen('list peer regions');
    const { library, id: agent } = this.#agent;
    const count = new Uint32Array(1);
    const read = (capacity: number) => {
      const arrays = {
        ids: new Uint32Array(capacity),
        addresses: new BigUint64Array(capacity),
        lengths: new BigUint64Array(capacity),
        kinds: new Uint32Array(capacity),
        devices: new Uint32Array(capacity),
      };
      const { ids, addresses, lengths, kinds, devices } = arrays;
      check(
        library,
        'kvt_peer_regions',
        library.api.kvt_peer_regions(agent, this.id, capacity, ids, addresses, lengths, kinds, devices, count),
      );
      return arrays;
    };
    read(0);
    const capacity = count[0] ?? 0;
    const { ids, addresses, lengths, kinds, devices } = read(capacity);
    return Array.from({ length: Math.min(capacity, count[0] ?? 0) }, (_, i) => ({
      id: ids[i] ?? 0,
      address: addresses[i] ?? 0n,
      bytes: Number(lengths[i]),
      kind: memoryKinds[kinds[i] ?? 0] ?? 'dram',
      device: devices[i] ?? 0,
    }));
  }

  /**
   * How this agent reaches the peer, in the library's words: for UCX the endpoint's lanes and
   * transports (as `ucp_ep_print_info` prints them, e.g. `posix/memory`), for loopback one line. The
   * agent's thread keeps it since it last changed, so asking does not wait for that thread.
   */
  transport(): string {
    this.assertOpen('describe the transport to a peer');
    const { library, id: agent } = this.#agent;
    const length = new Uint32Array(1);
    let text = Buffer.alloc(TRANSPORT_TEXT_BYTES);
    check(library, 'kvt_peer_transport', library.api.kvt_peer_transport(agent, this.id, text, text.length, length));
    if ((length[0] ?? 0) >= text.length) {
      text = Buffer.alloc((length[0] ?? 0) + 1);
      check(library, 'kvt_peer_transport', library.api.kvt_peer_transport(agent, this.id, text, text.length, length));
    }
    return text.toString('utf8', 0, Math.min(length[0] ?? 0, text.length - 1));
  }

  /**
   * Has the agent probe this peer on its heartbeat interval even while no transfer uses it (the layers
   * above watch the peers they hold pins on), so that it is reported (`peer-unresponsive` from
   * `agent.peerEvents()`) when it stops answering. Watching survives reloads; calling it again does nothing.
   */
  watch(): void {
    this.#setWatched(true);
  }

  /** Stops watching the peer: it is probed only while transfers use it. */
  unwatch(): void {
    this.#setWatched(false);
  }

  #setWatched(watched: boolean): void {
    this.assertOpen(watched ? 'watch a peer' : 'unwatch a peer');
    check(
      this.#agent.library,
      'kvt_peer_watch',
      this.#agent.library.api.kvt_peer_watch(this.#agent.id, this.id, watched ? 1 : 0),
    );
  }

  /**
   * Bumps the peer's generation: every later post or notification through this handle is refused
   * with NOT_FOUND until the peer's metadata is loaded again. Operations already posted run to their end.
   */
  invalidate(): void {
    this.assertOpen('invalidate a peer');
    check(
      this.#agent.library,
      'kvt_peer_invalidate',
      this.#agent.library.api.kvt_peer_invalidate(this.#agent.id, this.id),
    );
  }

  /** Forgets the peer (closing its connection). Refused with BUSY while its operations are in progress. */
  unload(): void {
    this.assertOpen('unload a peer');
    check(this.#agent.library, 'kvt_peer_unload', this.#agent.library.api.kvt_peer_unload(this.#agent.id, this.id));
    this.#state.markClosed();
    this.#onUnload(this);
  }
}

/** Throws InvalidArgumentError naming `peer` unless it is a Peer handle (of any agent: the caller checks whose). */
export function assertPeer(peer: unknown): asserts peer is Peer {
  if (!(peer instanceof Peer)) throw new InvalidArgumentError('peer', peer, 'must be a Peer from agent.loadPeer');
}
