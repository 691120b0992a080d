// A ucx agent in a process of its own with one registered bank holding the test pattern (the remote side
// of the cross-process benchmarks and of the close tests). It publishes its metadata, keeps its agent
// (and progress thread) alive, and closes on request.
import { transport } from './backends.js';
import { emit, exitWithParent, untilParentSays } from './child.js';
import { fillPattern } from './content.js';

exitWithParent();

const [name = 'bench-source', bytesText = '4096', seedText = '1'] = process.argv.slice(2);
const agent = await transport.createAgent({ name, backend: 'ucx' });
const bank = await agent.allocate(Number(bytesText));
fillPattern(bank.view(), Number(seedText));
const region = agent.register(bank);
emit({ event: 'ready', metadata: agent.metadata().toString('base64'), region: region.id });
await untilParentSays('close');
await region.deregister();
await bank.free();
await agent.close();
emit({ event: 'closed' });
process.exit(0);
