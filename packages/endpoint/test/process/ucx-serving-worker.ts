// The serving side of the two-process endpoint test, as its own process: a decode worker of TP 2 (one
// ucx agent per rank, each a serving ReuseEndpoint) publishing to the SQLite discovery file it is
// given. It reports its incarnation and epoch once ready, with each rank's agent name and metadata (its
// worker address: what a test hands an intruder, as if it leaked); on SIGTERM it drains both ranks and
// reports each drain (pins waited for, banks returned), then exits. Commands on stdin, one JSON line
// each: `{"advance": ms}` moves its clock (pin leases lapse on it), then, like `{}`, has it report each
// rank's pins held and pin messages refused (a `state` line) on the next turn (a lapse is judged there).
import { createInterface } from 'node:readline';
import { openClusterSecret, openSqliteDiscovery } from '@kvreuse/discovery';
import { allReady, openWorker, start } from '../support/endpoint-workers.js';
import { nextTurn } from '../support/next-turn.js';

const [path = ''] = process.argv.slice(2);
const store = await openSqliteDiscovery(path);
const cleanups: (() => Promise<unknown>)[] = [];
const decode = await openWorker(
  store,
  {
    workerId: 'decode-0',
    role: 'decode',
    tpSize: 2,
    serve: true,
    backend: 'ucx',
    secret: openClusterSecret({ backend: 'sqlite', sqlitePath: path, secretFile: '' }),
  },
  cleanups,
);
await start(decode);
await allReady(decode);
const epoch = decode.ranks[0]?.endpoint.epoch;
const agents = decode.ranks.map(({ agent }) => ({ name: agent.name, metadata: agent.metadata().toString('base64') }));
process.stdout.write(
  `${JSON.stringify({ event: 'ready', incarnation: decode.identity.incarnation, epoch, agents })}\n`,
);
const commands = createInterface({ input: process.stdin });
commands.on('line', async (line) => {
  const { advance } = JSON.parse(line) as { advance?: number };
  if (advance !== undefined) decode.clock.advance(advance);
  await nextTurn();
  const ranks = decode.ranks.map(({ endpoint }) => ({
    pinsHeld: endpoint.pinServer?.heldPins,
    refused: endpoint.refusedPinMessages,
  }));
  process.stdout.write(`${JSON.stringify({ event: 'state', ranks })}\n`);
});
const alive = setInterval(() => {}, 1 << 30);
process.once('SIGTERM', () => {
  void (async () => {
    process.stdout.write(`${JSON.stringify({ event: 'draining' })}\n`);
    const reports = await Promise.all(decode.ranks.map(({ endpoint }) => endpoint.drain({ deadlineMs: 600_000 })));
    const drained = reports.map((report) => ({
      pins: report.pins,
      readers: report.readers,
      banksReturned: report.banksReturned.length,
      banksRetained: report.banksRetained.length,
    }));
    for (const cleanup of cleanups) await cleanup();
    await store.close();
    process.stdout.write(`${JSON.stringify({ event: 'drained', drained })}\n`);
    commands.close();
    clearInterval(alive);
  })();
});
