// The source of the SIGKILL test: a ucx agent exposing the 42-block Qwen3-0.6B prefix, progressing
// (natively) until it is killed.
import { tell } from '../support/child.js';
import { transport } from '../support/loopback-world.js';

export const QWEN3_PREFIX_BYTES = 308_281_344;

const [name = 'sigkill-source'] = process.argv.slice(2);
const agent = await transport.createAgent({ name, backend: 'ucx' });
const memory = await agent.allocate(QWEN3_PREFIX_BYTES);
memory.view().fill(0x3c);
const region = agent.register(memory);
tell({ event: 'ready', metadata: agent.metadata().toString('base64'), region: region.id });
// Stay alive until killed; the agent's progress thread serves readers.
setInterval(() => {}, 1 << 30);
