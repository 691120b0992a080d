// One rank of the demo's workers as its own OS process: a UCX (or loopback) agent, its kvreuse-owned
// banks laid out for Qwen3-0.6B, a ReuseEndpoint that registers them and publishes its rank part to the
// SQLite discovery file. It reports on stdout (rank-messages.ts) and, on SIGTERM, drains source side first,
// hands every bank back, closes its agent, reports the drain and exits (1 if anything stayed retained).
// Arguments: <role> <workerId> <incarnation> <tpRank> <tpSize> <sqlite path> <backend> <blocks per bank>
import { defaultSettings } from '@kvreuse/config';
import { layoutRankBanks, referenceGeometries } from '@kvreuse/descriptors';
import { shutdownOnSignals } from '@kvreuse/drain';
import { ReuseEndpoint } from '@kvreuse/endpoint';
import { type Backend, loadTransport } from '@kvreuse/native-bindings';
import { Bank, kvreuseOwner, openSqliteDiscovery } from '@kvreuse/registry';
import { drainSummary, encodeRankMessage, type RankRole } from './rank-messages.js';

const [role, workerId, incarnation, tpRankText, tpSizeText, sqlitePath, backend, blocksText] = process.argv.slice(2);
if (blocksText === undefined) throw new Error('usage: rank-process <role> <workerId> <incarnation> <tpRank> <tpSize> <sqlite path> <backend> <blocks per bank>');
const tpRank = Number(tpRankText);
const tpSize = Number(tpSizeText);
const said = { role: role as RankRole, tpRank };
const geometry = referenceGeometries['qwen3-0.6b'];

try {
  const discovery = openSqliteDiscovery(sqlitePath as string);
  const agent = await loadTransport().createAgent({ name: `${workerId}-tp${tpRank}-${incarnation}`, backend: backend as Backend });
  const layout = layoutRankBanks(geometry, { tpRank, tpSize, ppRank: 0, ppSize: 1 }, { address: 0n, blocks: Number(blocksText) });
  const banks = await Promise.all(
    layout.map(async (bank, index) => {
      const allocation = await agent.allocate(bank.bytes);
      return Bank.adopt({ ...bank, tpRank, ppRank: 0, index, address: allocation.address }, kvreuseOwner(allocation));
    }),
  );
  const endpoint = new ReuseEndpoint({
    agent,
    discovery,
    worker: { workerId: workerId as string, incarnation: incarnation as string, role: role as RankRole, geometry, tpSize, ppSize: 1, dpRank: 0 },
    rank: { tpRank, ppRank: 0 },
    banks,
    settings: defaultSettings,
  });
  endpoint.onTransition(({ to }) => {
    if (to === 'ready') process.stdout.write(encodeRankMessage({ type: 'ready', ...said }));
  });
  shutdownOnSignals(
    { shutdown: () => endpoint.close() },
    {
      onResult: (result) => {
        process.stdout.write(encodeRankMessage({ type: 'drained', ...said, drain: drainSummary(result.report, result.agentDestroyed) }));
        void discovery.close();
      },
      onError: (error) => process.stdout.write(encodeRankMessage({ type: 'failed', ...said, message: error instanceof Error ? error.message : String(error) })),
    },
  );
  // The lease renewal timer does not keep a process alive; this does, until a signal ends it.
  setInterval(() => {}, 1 << 30);
  await endpoint.register({ timeoutMs: 30_000 });
  await endpoint.publish();
  process.stdout.write(encodeRankMessage({ type: 'published', ...said, agentName: agent.name, epoch: endpoint.epoch as number }));
} catch (error) {
  process.stdout.write(encodeRankMessage({ type: 'failed', ...said, message: error instanceof Error ? `${error.name}: ${error.message}` : String(error) }));
  process.exit(1);
}
