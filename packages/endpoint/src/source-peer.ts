// Loading the source ranks' peers for a pull, all or none: what the native layer refuses because of the
// source (its agent out of reach, its metadata not loadable here) refuses the pull, naming the rank; what
// says this agent itself failed is thrown as it is.
import type { RankPart } from '@kvreuse/descriptors';
import { type Agent, NativeTransportError, type Peer, type StatusCodeName } from '@kvreuse/native-bindings';
import { type ClusterSecret, TransportMetadataRefusedError } from '@kvreuse/discovery';
import { loadRankPeer } from '@kvreuse/registry';
import { describeRank, type PullRefusal, PullRefusedError } from './errors.js';
import { type PeerHolds, queuePeerLoad } from './peer-loads.js';

/**
 * The kvt_peer_load failures that are the source's (native/src/peer.c, metadata.c, ucx.c, loopback.c):
 * its agent cannot be reached — REMOTE_DISCONNECT (its process or agent is gone, or UCX finds no path to
 * it), NOT_SUPPORTED (a loopback agent in another process) — or its metadata cannot be loaded here —
 * MISMATCH (another backend, another blob format, or an older generation than the one loaded) and
 * INVALID_PARAM (a malformed blob, which the source signed so: the registry checked the signature first).
 * The rest are this agent's own: NO_MEMORY, BACKEND (UCX could not create an endpoint or unpack a remote
 * key in this process — true of any source) and NOT_FOUND (this agent is closed).
 */
const sourceFailures: Partial<Record<StatusCodeName, { readonly reason: PullRefusal; readonly what: string }>> = {
  REMOTE_DISCONNECT: { reason: 'source-unreachable', what: 'its agent cannot be reached' },
  NOT_SUPPORTED: { reason: 'source-unreachable', what: 'its agent cannot be reached' },
  MISMATCH: { reason: 'metadata-refused', what: 'its transport metadata cannot be loaded here' },
  INVALID_PARAM: { reason: 'metadata-refused', what: 'its transport metadata cannot be loaded here' },
};

/**
 * The peer of a source rank, once its metadata's signature checks out. A refused signature refuses the
 * pull (`metadata-refused`, the `TransportMetadataRefusedError` as cause), and so does a native failure
 * that is the source's (`source-unreachable` or `metadata-refused`, the `NativeTransportError` as cause).
 */
export async function loadSourcePeer(
  agent: Pick<Agent, 'loadPeerInBackground'>,
  part: RankPart,
  secret: ClusterSecret,
): Promise<Peer> {
  try {
    return await loadRankPeer(agent, part, secret);
  } catch (error) {
    const rank = `${part.workerId} ${describeRank({ tpRank: part.parallel.tpRank, ppRank: part.parallel.ppRank })}`;
    if (error instanceof TransportMetadataRefusedError)
      throw new PullRefusedError('metadata-refused', `${rank}: ${error.message}`, { cause: error });
    const sourceFailure =
      error instanceof NativeTransportError ? sourceFailures[error.code as StatusCodeName] : undefined;
    if (sourceFailure !== undefined)
      throw new PullRefusedError(sourceFailure.reason, `${rank}: ${sourceFailure.what} (${(error as Error).message})`, {
        cause: error,
      });
    throw error;
  }
}

/**
 * The peers of `parts`, loaded all or none, on the agent's thread (queued behind its other peer loads):
 * when one is refused (or fails), the peers this call loaded anew are unloaded before the promise
 * rejects, so a refused pull leaves no peer of its own behind. Peers loaded before it — by an earlier
 * pull, or to answer a reader's pins — are left loaded. Loaded, every peer is held in `holds` until released there.
 */
export function loadSourcePeers(
  agent: Pick<Agent, 'loadPeerInBackground' | 'peers'>,
  parts: Iterable<RankPart>,
  secret: ClusterSecret,
  holds: PeerHolds,
): Promise<Map<RankPart, Peer>> {
  return queuePeerLoad(agent, async () => {
    const peers = await loadAllOrNone(agent, [...parts], secret);
    for (const [part, peer] of peers) holds.hold(part, peer);
    return peers;
  });
}

async function loadAllOrNone(
  agent: Pick<Agent, 'loadPeerInBackground' | 'peers'>,
  parts: readonly RankPart[],
  secret: ClusterSecret,
): Promise<Map<RankPart, Peer>> {
  const peers = new Map<RankPart, Peer>();
  const loadedBefore = new Set(agent.peers());
  const loadedAnew: Peer[] = [];
  try {
    for (const part of parts) {
      // A load hands back the same Peer for one already loaded (a newer generation updates it).
      const peer = await loadSourcePeer(agent, part, secret);
      if (!loadedBefore.has(peer) && !loadedAnew.includes(peer)) loadedAnew.push(peer);
      peers.set(part, peer);
    }
  } catch (error) {
    for (const peer of loadedAnew) peer.unload();
    throw error;
  }
  return peers;
}
