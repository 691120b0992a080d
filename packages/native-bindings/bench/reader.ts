// The reading side of a cross-process benchmark, run as a process of its own (for example in another
// network namespace): a ucx agent that loads the source's metadata, pulls `count` × `pieceBytes` from
// its region as one batch, verifies the first pull against the source's pattern, then times one pull
// per `pull` command.
import type { PostRequest } from '@kvreuse/native-bindings';
import { transport } from '../test/support/backends.js';
import { emit, exitWithParent, nextMessageFromParent } from '../test/support/child.js';
import { findPatternMismatch } from '../test/support/content.js';
import { descriptors, timeReads } from './reads.js';

exitWithParent();

const [name = 'bench-reader', countText = '1', pieceText = '4096', seedText = '1'] = process.argv.slice(2);
const count = Number(countText);
const pieceBytes = Number(pieceText);
const published = await nextMessageFromParent();

const agent = await transport.createAgent({ name, backend: 'ucx' });
const bank = await agent.allocate(count * pieceBytes);
bank.view().fill(0);
const region = agent.register(bank);
const peer = agent.loadPeer(Buffer.from(String(published['metadata']), 'base64'));
const request: PostRequest = {
  direction: 'read',
  peer,
  descriptors: descriptors(count, pieceBytes, (i) => i * pieceBytes),
  localRegions: [region],
  remoteRegions: [Number(published['region'])],
};
await timeReads(agent, request, 1, 1);
emit({ event: 'ready', path: peer.transport(), mismatch: findPatternMismatch(bank.view(), Number(seedText)) });

for (;;) {
  const message = await nextMessageFromParent();
  if (message['command'] === 'close') break;
  emit({ event: 'pulled', seconds: await timeReads(agent, request, 1, 1) });
}
await region.deregister();
await bank.free();
await agent.close();
emit({ event: 'closed' });
process.exit(0);
