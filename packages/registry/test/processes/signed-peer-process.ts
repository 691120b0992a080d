// One single-rank worker as its own process on ucx: publishes its rank part, its transport metadata signed
// under the cluster secret its settings name, then loads each named peer worker from discovery once that
// worker is ready, and prints one JSON line per peer: loaded (the peer's region count), or refused (the
// error's code and refusal, and whether the native layer was reached: its live peers and error counts).
// Stays up, serving its metadata, until SIGTERM.
// Arguments: <sqlite|etcd> <sqlite path | etcd url> <secret file, '' for the default> <workerId> <peer workerIds, comma-separated>
import { referenceGeometries } from '@kvreuse/descriptors';
import { loadTransport, type Peer } from '@kvreuse/native-bindings';
import {
  connectEtcdDiscovery,
  type DiscoveryStore,
  openClusterSecret,
  openSqliteDiscovery,
  startRankPublication,
} from '@kvreuse/discovery';
import {
  buildRankPart,
  loadRankPeer,
  registerRank,
  type RegistryError,
  releaseRank,
  transportMetadataOf,
} from '../../src/index.js';
import { identityOf, prepareRank, type WorkerSetup } from '../helpers/worker.js';
import { whenReady } from '../helpers/ready-worker.js';

const [backend, location, secretFile, workerId, peers] = process.argv.slice(2);
if (peers === undefined)
  throw new Error('usage: signed-peer-process <sqlite|etcd> <location> <secret file> <workerId> <peer workerIds>');

const secret = openClusterSecret({
  backend: backend as 'sqlite' | 'etcd',
  sqlitePath: location!,
  secretFile: secretFile!,
});
const store: DiscoveryStore =
  backend === 'sqlite'
    ? openSqliteDiscovery(location!)
    : connectEtcdDiscovery({ hosts: location!, requestTimeoutMs: 2_000 });
const setup: WorkerSetup = {
  transport: loadTransport(),
  backend: 'ucx',
  workerId: workerId!,
  incarnation: 'inc-1',
  geometry: referenceGeometries['qwen3-0.6b'],
  tpSize: 1,
  blocks: 2,
};
const prepared = await prepareRank(setup, 0);
const rank = await registerRank({ agent: prepared.agent, banks: prepared.banks, timeoutMs: 10_000 });
const publication = await startRankPublication(
  store,
  [buildRankPart(identityOf(setup), rank, transportMetadataOf(prepared.agent, secret, { ...setup, ...rank }))],
  { leaseTtlMs: 60_000 },
);

const loaded: Peer[] = [];
// Handled from here on: the test may stop the process the moment it has read the last outcome.
const alive = setInterval(() => {}, 1 << 30);
process.once('SIGTERM', () => {
  void (async () => {
    clearInterval(alive);
    await publication.withdraw();
    for (const peer of loaded) peer.unload();
    await releaseRank(rank);
    await prepared.agent.close();
    await store.close();
    process.exit(0);
  })();
});

const errorsOf = () => Object.values(prepared.agent.counters().errors).reduce((sum, count) => sum + count, 0);
for (const peerId of peers.split(',')) {
  const worker = await whenReady(store, peerId);
  const errorsBefore = errorsOf();
  try {
    const peer = await loadRankPeer(prepared.agent, worker.worker.ranks[0]!, secret);
    loaded.push(peer);
    process.stdout.write(`${JSON.stringify({ peer: peerId, loaded: peer.info().regionCount })}\n`);
  } catch (error) {
    const { code, refusal } = error as RegistryError & { refusal?: string };
    const { livePeers } = prepared.agent.counters();
    process.stdout.write(
      `${JSON.stringify({ peer: peerId, refused: code, refusal, livePeers, nativeErrors: errorsOf() - errorsBefore })}\n`,
    );
  }
}
