// One rank of the demo's workers as its own OS process (demo-rank.ts). It reads the parent's commands
// from stdin and reports on stdout (rank-messages.ts); on SIGTERM, or when its parent is gone (stdin
// closed), it drains source side first (waiting for readers' pins), hands every bank back, closes its
// agent, reports the drain and exits (1 if anything stayed retained).
// Argument: its DemoRankOptions as JSON (the parent resolved and validated the settings in them).
import { createInterface } from 'node:readline';
import { shutdownOnSignals } from '@kvreuse/drain';
import { DemoRank, type DemoRankOptions } from './demo-rank.js';
import { drainSummary, encodeRankMessage, failure, parseRankCommand, type RankMessage } from './rank-messages.js';

const [optionsJson] = process.argv.slice(2);
if (optionsJson === undefined) throw new Error('usage: rank-process <DemoRankOptions as JSON>');
const options = JSON.parse(optionsJson) as DemoRankOptions;
const said = { role: options.role, tpRank: options.tpRank };
const say = (message: object): void => {
  process.stdout.write(encodeRankMessage({ ...said, ...message } as RankMessage));
};
const fail = (error: unknown): void => say(failure(error));
// A parent that is gone reads nothing: what the rank says while it drains is dropped, not an EPIPE crash.
process.stdout.on('error', () => undefined);

try {
  const rank = await DemoRank.open(options, say, {
    crash: () => process.kill(process.pid, 'SIGKILL'),
    stop: () => process.kill(process.pid, 'SIGSTOP'),
  });
  shutdownOnSignals(
    { shutdown: () => rank.close() },
    {
      onResult: (result) => say({ type: 'drained', drain: drainSummary(result.report, result.agentDestroyed) }),
      onError: fail,
    },
  );
  // Commands run as they come: `resume` must reach a pull that waits for it.
  createInterface({ input: process.stdin })
    .on('line', (line) => {
      try {
        rank.handle(parseRankCommand(line)).catch(fail);
      } catch (error) {
        fail(error);
      }
    })
    // The parent's end of the pipe closed: it is gone (killed, crashed). Drain as on SIGTERM rather than
    // hold registered memory and a published rank part with nobody to stop it.
    .on('close', () => process.kill(process.pid, 'SIGTERM'));
  // The lease renewal timer does not keep a process alive; this does, until a signal ends it.
  setInterval(() => {}, 1 << 30);
  await rank.reportReady();
} catch (error) {
  fail(error);
  process.exit(1);
}
