// Reads once from the bench's source process with UCX_LOG_LEVEL=info set by the parent, so that UCX
// prints the lanes its endpoint uses (ep_cfg: rma_bw(posix/memory …)): the transport actually taken.
import { agentName, transport } from '../test/support/backends.js';
import { emit, exitWithParent, nextMessageFromParent } from '../test/support/child.js';
import { piecewiseDescriptors } from '../test/support/content.js';

exitWithParent();

const published = await nextMessageFromParent();
const bytes = Number(published['bytes']);
const agent = transport.createAgent({ name: agentName('ucx-path'), backend: 'ucx' });
const bank = agent.allocate(bytes);
const region = agent.register(bank);
const peer = agent.loadPeer(Buffer.from(String(published['metadata']), 'base64'));
const operation = agent.post({
  direction: 'read',
  peer,
  descriptors: piecewiseDescriptors(1, bytes),
  localRegions: [region],
  remoteRegions: [Number(published['region'])],
});
await operation.done;
operation.release();
region.deregister();
bank.free();
agent.close();
emit({ event: 'done' });
process.exit(0);
