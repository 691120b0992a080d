// One incarnation of a single-rank decode worker as its own process: registers its banks (loopback),
// publishes its rank part to shared discovery (a SQLite file or etcd) under a renewed lease, and
// reports on stdout, one line each:
//   published <epoch>                      once its part is published
//   superseded <code> <newer incarnation> <newer epoch>
//                                          when it learns a newer incarnation took over
//   stopped <writes after superseded>      on SIGTERM, after withdrawing: how many leases it
//                                          granted or commits it made after it was superseded
// Arguments: <sqlite|etcd> <sqlite path | etcd url> <workerId> <incarnation> <leaseTtlMs>
import { referenceGeometries } from '@kvreuse/descriptors';
import { loadTransport } from '@kvreuse/native-bindings';
import {
  ClusterSecret,
  connectEtcdDiscovery,
  type DiscoveryStore,
  openSqliteDiscovery,
  startRankPublication,
  type SupersededError,
} from '@kvreuse/discovery';
import { buildRankPart, registerRank, releaseRank, transportMetadataOf } from '../../src/index.js';
import { identityOf, prepareRank, type WorkerSetup } from '../helpers/worker.js';

const [backend, location, workerId, incarnation, leaseTtlMs] = process.argv.slice(2);
if (leaseTtlMs === undefined || (backend !== 'sqlite' && backend !== 'etcd')) {
  throw new Error(
    'usage: incarnation-process <sqlite|etcd> <sqlite path | etcd url> <workerId> <incarnation> <leaseTtlMs>',
  );
}
const say = (line: string) => process.stdout.write(`${line}\n`);

const store: DiscoveryStore =
  backend === 'sqlite'
    ? openSqliteDiscovery(location!)
    : connectEtcdDiscovery({ hosts: location!, requestTimeoutMs: 2_000 });
// Counts the writes that would republish: a lease granted or a commit made once superseded.
let superseded: SupersededError | undefined;
let writesAfterSuperseded = 0;
for (const method of ['grantLease', 'commit'] as const) {
  const original = store[method].bind(store) as (...args: unknown[]) => Promise<unknown>;
  (store as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
    if (superseded !== undefined) writesAfterSuperseded++;
    return original(...args);
  };
}

const setup: WorkerSetup = {
  transport: loadTransport(),
  backend: 'loopback',
  workerId: workerId!,
  incarnation: incarnation!,
  geometry: referenceGeometries['qwen3-0.6b'],
  tpSize: 1,
  blocks: 2,
};
const prepared = await prepareRank(setup, 0);
const rank = await registerRank({ agent: prepared.agent, banks: prepared.banks, timeoutMs: 10_000 });
const part = buildRankPart(
  identityOf(setup),
  rank,
  transportMetadataOf(prepared.agent, ClusterSecret.ofThisProcess(), { ...setup, ...rank }),
);
const publication = await startRankPublication(store, [part], {
  leaseTtlMs: Number(leaseTtlMs),
  onTrouble: (error) => process.stderr.write(`lease trouble: ${error.message}\n`),
  onSuperseded: (error) => {
    superseded = error;
    say(`superseded ${error.code} ${error.newerIncarnation} ${error.newerEpoch}`);
  },
});
say(`published ${publication.epoch}`);

// The renewal timer is unref'd; this keeps the process alive until it is told to stop.
const alive = setInterval(() => {}, 1 << 30);
process.once('SIGTERM', () => {
  void (async () => {
    clearInterval(alive);
    const writes = writesAfterSuperseded;
    await publication.withdraw();
    await releaseRank(rank);
    await prepared.agent.close();
    await store.close();
    say(`stopped ${writes}`);
    process.exit(0);
  })();
});
