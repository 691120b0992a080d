// The test engine (tools/test-engine) as its own process, adopted into the sidecar at the socket path it
// is given: it holds the full blocks of the token sequence 0, 1, … of the length it is given (its memory a
// memfd), hands that memory to the sidecar and reports the answer with its geometry, then stays until
// killed. It also publishes vLLM's KV events, which nothing here reads.
import { TestEngine } from '@kvreuse-internal/test-engine';

const [path = '', tokenCount = '64'] = process.argv.slice(2);
const engine = await TestEngine.open({ blocks: 16 });
await engine.store(Array.from({ length: Number(tokenCount) }, (_, i) => i));
const answer = engine.adopt(path, { workerId: 'test-engine-0' });
process.stdout.write(`${JSON.stringify({ event: 'adopted', answer, geometry: engine.geometry() })}\n`);
setInterval(() => {}, 1 << 30);
