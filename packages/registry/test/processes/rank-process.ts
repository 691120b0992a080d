// One rank of a decode worker as its own process: registers its banks, publishes its part to the
// SQLite discovery file under a renewed lease, says "published" on stdout, and on SIGTERM withdraws
// the part, hands its banks back and exits 0. Killed with SIGKILL, it leaves its lease to expire.
// Arguments: <sqlite path> <workerId> <incarnation> <tpRank> <tpSize> <leaseTtlMs>
import { referenceGeometries } from '@kvreuse/descriptors';
import { loadTransport } from '@kvreuse/native-bindings';
import { openClusterSecret, openSqliteDiscovery, startRankPublication } from '@kvreuse/discovery';
import { buildRankPart, registerRank, releaseRank, transportMetadataOf } from '../../src/index.js';
import { identityOf, prepareRank, type WorkerSetup } from '../helpers/worker.js';

const [path, workerId, incarnation, tpRank, tpSize, leaseTtlMs] = process.argv.slice(2);
if (leaseTtlMs === undefined)
  throw new Error('usage: rank-process <sqlite path> <workerId> <incarnation> <tpRank> <tpSize> <leaseTtlMs>');

const transport = loadTransport();
const setup: WorkerSetup = {
  transport,
  backend: 'ucx',
  workerId: workerId!,
  incarnation: incarnation!,
  geometry: referenceGeometries['qwen3-0.6b'],
  tpSize: Number(tpSize),
  blocks: 2,
};
const store = openSqliteDiscovery(path!);
const prepared = await prepareRank(setup, Number(tpRank));
const rank = await registerRank({ agent: prepared.agent, banks: prepared.banks, timeoutMs: 10_000 });
const part = buildRankPart(
  identityOf(setup),
  rank,
  transportMetadataOf(prepared.agent, openClusterSecret({ backend: 'sqlite', sqlitePath: path!, secretFile: '' }), {
    ...setup,
    ...rank,
  }),
);
const publication = await startRankPublication(store, [part], {
  leaseTtlMs: Number(leaseTtlMs),
  onTrouble: (error) => process.stderr.write(`lease trouble: ${error.message}\n`),
});
process.stdout.write('published\n');

// The renewal timer is unref'd; this keeps the process alive until it is told to stop.
const alive = setInterval(() => {}, 1 << 30);
process.once('SIGTERM', () => {
  void (async () => {
    clearInterval(alive);
    await publication.withdraw();
    await releaseRank(rank);
    await prepared.agent.close();
    await store.close();
    process.exit(0);
  })();
});
