// The test engine as its own OS process, the decode side of `kvreuse demo --engine test`: it owns its
// memfd, hands it to the kvreuse sidecar listening at the socket path it is given, then holds the token
// sequences its parent sends and publishes them as vLLM's KV events. It reports on stdout, one JSON line
// each: `open` (its publisher and replay endpoints, its geometry), `adopted` (the sidecar's answer),
// `stored` (the blocks of each sequence). Its stdin takes one JSON line per sequence, `{"tokens": […]}`;
// on SIGTERM, or when its stdin closes (its parent is gone), it closes its sockets and its memory — the
// sidecar withdraws what it adopted — and exits.
// Arguments: <socket> <workerId> [blocks] [blockBytes].
import { createInterface } from 'node:readline';
import { TestEngine } from './test-engine.js';

const [socket, workerId, blocks = '64', blockBytes = '4096'] = process.argv.slice(2);
if (socket === undefined || workerId === undefined)
  throw new Error('usage: engine-process <socket> <workerId> [blocks] [blockBytes]');
const say = (message: object): void => void process.stdout.write(`${JSON.stringify(message)}\n`);
process.stdout.on('error', () => undefined);

const engine = await TestEngine.open({ blocks: Number(blocks), blockBytes: Number(blockBytes) });
let closed = false;
const close = (): void => {
  if (closed) return;
  closed = true;
  engine.close();
  process.exit(0);
};
process.once('SIGTERM', close);
process.once('SIGINT', close);
say({ event: 'open', endpoint: engine.endpoint, replayEndpoint: engine.replayEndpoint, geometry: engine.geometry() });
// The adoption waits for the sidecar's answer on this thread: the sidecar runs in another process.
say({ event: 'adopted', answer: engine.adopt(socket, { workerId }) });

let storing = Promise.resolve();
createInterface({ input: process.stdin })
  .on('line', (line) => {
    const { tokens } = JSON.parse(line) as { tokens: number[] };
    // Stored once a subscriber listens, so that the events reach it live (the replay socket keeps them too).
    // The memory is host memory (a memfd), as an engine's CPU tier is: the blocks are published as medium CPU.
    storing = storing.then(async () => {
      await engine.waitForSubscribers(1);
      say({ event: 'stored', blocks: (await engine.store(tokens, 'CPU')).length });
    });
  })
  .on('close', close);
