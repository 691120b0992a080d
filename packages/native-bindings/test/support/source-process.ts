// A ucx agent in a process of its own with one registered bank holding the test pattern (the remote side
// of the cross-process benchmarks and of the close tests). It publishes its metadata, keeps its agent
// (and progress thread) alive, and closes on request. The bank comes from the library's allocator, or
// with `caller` as the fourth argument is caller memory: a Node Buffer the library did not allocate, as
// a framework's own bank, registered by address; with `file` it is caller memory that is a shared mapping
// of a memfd (FileMemory), registered with its fd.
import { FileMemory } from '@kvreuse/native-bindings';
import koffi from 'koffi';
import { transport } from './backends.js';
import { emit, exitWithParent, untilParentSays } from './child.js';
import { fillPattern } from './content.js';

exitWithParent();

const [name = 'bench-source', bytesText = '4096', seedText = '1', memory = 'allocated'] = process.argv.slice(2);
if (memory !== 'allocated' && memory !== 'caller' && memory !== 'file') {
  throw new Error(`source-process: memory must be allocated, caller or file, not ${memory}`);
}
const bytes = Number(bytesText);
const agent = await transport.createAgent({ name, backend: 'ucx' });
const bank = memory === 'allocated' ? await agent.allocate(bytes) : undefined;
const file = memory === 'file' ? FileMemory.create(bytes) : undefined;
// Caller memory stays referenced here until its region is deregistered.
const contents = bank?.view() ?? file?.view() ?? Buffer.alloc(bytes);
fillPattern(contents, Number(seedText));
const region = agent.register(bank ?? file?.range() ?? { address: koffi.address(contents), bytes });
emit({ event: 'ready', metadata: agent.metadata().toString('base64'), region: region.id });
await untilParentSays('close');
await region.deregister();
await bank?.free();
file?.close();
await agent.close();
emit({ event: 'closed' });
process.exit(0);
