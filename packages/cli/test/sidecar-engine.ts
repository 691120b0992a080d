// The engine of the sidecar command's test, as its own process (its adoption waits for the answer on its
// thread): the test engine holds the token sequence 0..63 in its memfd, hands it to the sidecar at the
// socket path it is given, prints the answer as one JSON line, and exits, which ends its connection.
import { TestEngine } from '@kvreuse-internal/test-engine';

const [path = ''] = process.argv.slice(2);
const engine = await TestEngine.open({ blocks: 16 });
await engine.store(Array.from({ length: 64 }, (_, i) => i));
const answer = engine.adopt(path, { workerId: 'cli-engine' });
process.stdout.write(`${JSON.stringify(answer)}\n`);
engine.close();
