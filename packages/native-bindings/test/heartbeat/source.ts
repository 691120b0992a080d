// The peer of the two-process heartbeat test: a ucx agent that publishes one patterned bank and waits
// (the test stops and resumes it), then closes on request.
import { transport } from '../support/backends.js';
import { emit, exitWithParent, untilParentSays } from '../support/child.js';
import { fillPattern } from '../support/content.js';

exitWithParent();

const [name = 'heartbeat-source', seedText = '1', bytesText = '1048576'] = process.argv.slice(2);
const agent = transport.createAgent({ name, backend: 'ucx' });
const bank = agent.allocate(Number(bytesText));
fillPattern(bank.view(), Number(seedText));
const region = agent.register(bank);
emit({ event: 'ready', metadata: agent.metadata().toString('base64'), region: region.id });

await untilParentSays('close');
region.deregister();
bank.free();
agent.close();
emit({ event: 'closed' });
process.exit(0);
