import type { RankPart } from '@kvreuse/descriptors';
import type { ClusterSecret } from '@kvreuse/discovery';
import type { Agent, Peer } from '@kvreuse/native-bindings';
import { loadRankPeer } from '@kvreuse/registry';

/** The end of each agent's queue of peer loads (settled either way). */
const queues = new WeakMap<object, Promise<void>>();

/**
 * Runs `load` once the peer loads of `agent` queued before it have settled. Peers load on the agent's
 * thread, the JavaScript thread going on meanwhile; queued, a pull that unloads the peers it loaded anew
 * when it is refused (loadSourcePeers) cannot unload one that another pull, push or pin loaded
 * meanwhile — loads of one agent do not overlap, as they did not when they blocked.
 */
export function queuePeerLoad<T>(agent: object, load: () => Promise<T>): Promise<T> {
  const run = (queues.get(agent) ?? Promise.resolve()).then(load);
  queues.set(
    agent,
    run.then(
      () => undefined,
      () => undefined,
    ),
  );
  return run;
}

/** Where a loaded peer is held for the worker incarnation it was loaded for (`RemotePeers`). */
export interface PeerHolds {
  hold(remote: Pick<RankPart, 'workerId' | 'incarnation'>, peer: Peer): void;
}

/** loadRankPeer, queued behind the agent's other peer loads; the peer is held in `holds` until released there. */
export function loadQueuedRankPeer(
  agent: Pick<Agent, 'loadPeerInBackground'>,
  part: RankPart,
  secret: ClusterSecret,
  holds: PeerHolds,
): Promise<Peer> {
  return queuePeerLoad(agent, async () => {
    const peer = await loadRankPeer(agent, part, secret);
    holds.hold(part, peer);
    return peer;
  });
}
