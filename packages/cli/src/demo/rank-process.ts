// One rank of the demo's workers as its own OS process (demo-rank.ts). It reads the parent's commands
// from stdin and reports on stdout (rank-messages.ts); on SIGTERM it drains source side first (waiting
// for readers' pins), hands every bank back, closes its agent, reports the drain and exits (1 if
// anything stayed retained).
// Arguments: <role> <workerId> <incarnation> <tpRank> <tpSize> <peer workerId> <sqlite path> <backend> <blocks per bank> <settings JSON>
import { createInterface } from 'node:readline';
import type { Settings } from '@kvreuse/config';
import { shutdownOnSignals } from '@kvreuse/drain';
import type { Backend } from '@kvreuse/native-bindings';
import { DemoRank } from './demo-rank.js';
import { drainSummary, encodeRankMessage, parseRankCommand, type RankMessage, type RankRole } from './rank-messages.js';

const [role, workerId, incarnation, tpRankText, tpSizeText, peerWorkerId, sqlitePath, backend, blocksText, settingsJson] = process.argv.slice(2);
if (settingsJson === undefined) throw new Error('usage: rank-process <role> <workerId> <incarnation> <tpRank> <tpSize> <peer workerId> <sqlite path> <backend> <blocks per bank> <settings JSON>');
const tpRank = Number(tpRankText);
const said = { role: role as RankRole, tpRank };
const say = (message: object): void => {
  process.stdout.write(encodeRankMessage({ ...said, ...message } as RankMessage));
};
const fail = (error: unknown): void => say({ type: 'failed', message: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });

try {
  const rank = await DemoRank.open(
    {
      role: role as RankRole,
      workerId: workerId as string,
      incarnation: incarnation as string,
      tpRank,
      tpSize: Number(tpSizeText),
      peerWorkerId: peerWorkerId as string,
      sqlitePath: sqlitePath as string,
      backend: backend as Backend,
      blocks: Number(blocksText),
      settings: JSON.parse(settingsJson) as Settings,
    },
    say,
  );
  shutdownOnSignals(
    { shutdown: () => rank.close() },
    {
      onResult: (result) => say({ type: 'drained', drain: drainSummary(result.report, result.agentDestroyed) }),
      onError: fail,
    },
  );
  // Commands run as they come: `resume` must reach a pull that waits for it.
  createInterface({ input: process.stdin }).on('line', (line) => {
    try {
      rank.handle(parseRankCommand(line)).catch(fail);
    } catch (error) {
      fail(error);
    }
  });
  // The lease renewal timer does not keep a process alive; this does, until a signal ends it.
  setInterval(() => {}, 1 << 30);
  await rank.publish();
} catch (error) {
  fail(error);
  process.exit(1);
}
