// The peers of remote ranks that this rank's pulls, pushes and served pins use: each held while it is
// used, and those of a worker's older incarnations unloaded once a newer one was seen and none holds them
// (a restarted worker's agent has a new name, so its old peer would stay loaded for good).
import { HandleClosedError, type Peer } from '@kvreuse/native-bindings';
import { queuePeerLoad } from './peer-loads.js';

/** The worker incarnation a peer was loaded for. */
export interface RemoteIncarnation {
  readonly workerId: string;
  readonly incarnation: string;
}

interface HeldPeer {
  readonly remote: RemoteIncarnation;
  holds: number;
}

export class RemotePeers {
  readonly #agent: object;
  readonly #onUnloaded: (peer: Peer) => void;
  /** By worker id: the incarnation seen last (ready in discovery, or resolved by a transfer or a pin). */
  readonly #current = new Map<string, string>();
  readonly #peers = new Map<Peer, HeldPeer>();
  /** Whether a peer of an incarnation other than its worker's current one may be loaded: only then is a sweep queued. */
  #superseded = false;

  /** `agent` is the one whose peer loads the unloads queue behind (`queuePeerLoad`); `onUnloaded` hears of each peer unloaded. */
  constructor(agent: object, onUnloaded: (peer: Peer) => void) {
    this.#agent = agent;
    this.#onUnloaded = onUnloaded;
  }

  /** Holds `peer`, loaded for `remote`, until `release`: called in the agent's queue of peer loads, right after the load. */
  hold(remote: RemoteIncarnation, peer: Peer): void {
    const holds = this.#peers.get(peer)?.holds ?? 0;
    this.#peers.set(peer, { remote: { workerId: remote.workerId, incarnation: remote.incarnation }, holds: holds + 1 });
    if (this.#isSuperseded(remote)) this.#superseded = true;
  }

  /** Gives back one hold of each of `peers`; a superseded peer no one holds is unloaded. */
  release(peers: Iterable<Peer>): void {
    for (const peer of peers) {
      const held = this.#peers.get(peer);
      if (held !== undefined) held.holds -= 1;
    }
    if (this.#superseded) this.#unloadSuperseded();
  }

  /** `remote` is its worker's incarnation now: the peers of its others are unloaded once no one holds them. */
  seen(remote: RemoteIncarnation): void {
    if (this.#current.get(remote.workerId) === remote.incarnation) return;
    this.#current.set(remote.workerId, remote.incarnation);
    this.#superseded = true;
    this.#unloadSuperseded();
  }

  /** Queued behind the peer loads begun before, so that no load hands out a peer this unloads meanwhile. */
  #unloadSuperseded(): void {
    void queuePeerLoad(this.#agent, async () => {
      let left = false;
      for (const [peer, { remote, holds }] of this.#peers) {
        if (!this.#isSuperseded(remote)) continue;
        if (holds > 0 || (peer.isOpen && !unloaded(peer))) {
          left = true;
          continue;
        }
        this.#peers.delete(peer);
        this.#onUnloaded(peer);
      }
      this.#superseded = left;
    });
  }

  #isSuperseded(remote: RemoteIncarnation): boolean {
    const current = this.#current.get(remote.workerId);
    return current !== undefined && current !== remote.incarnation;
  }
}

/**
 * Unloads `peer`: false while operations that outlived their transfer (quarantined, cancelling) still use
 * it, or when the unload fails otherwise; it is tried again at the next release or newer incarnation.
 */
function unloaded(peer: Peer): boolean {
  try {
    peer.unload();
    return true;
  } catch (error) {
    // The agent is closing: it forgets its peers itself.
    return error instanceof HandleClosedError;
  }
}
