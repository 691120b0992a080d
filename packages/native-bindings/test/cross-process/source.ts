// Process A of the cross-process proof: owns the 42-block Qwen3-0.6B prefix in a ucx agent,
// publishes its metadata, waits for the reader's completion notification, then closes on request.
import { transport } from '../support/backends.js';
import { emit, exitWithParent, untilParentSays } from '../support/child.js';
import { fillPattern } from '../support/content.js';
import { QWEN3_PREFIX_BYTES } from '../support/qwen3.js';

exitWithParent();

const [name = 'source', seedText = '1'] = process.argv.slice(2);
const agent = await transport.createAgent({ name, backend: 'ucx' });
const bank = await agent.allocate(QWEN3_PREFIX_BYTES);
fillPattern(bank.view(), Number(seedText));
const region = agent.register(bank);
emit({ event: 'ready', metadata: agent.metadata().toString('base64'), region: region.id, bytes: region.bytes });

const notification = await agent.nextNotification();
emit({ event: 'notified', sender: notification.sender, data: notification.data.toString() });

await untilParentSays('close');
await region.deregister();
await bank.free();
await agent.close();
emit({ event: 'closed', counters: transport.counters() });
process.exit(0);
