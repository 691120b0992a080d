// A process without the cluster secret that got hold of a source's worker addresses (its agents'
// metadata) and names its own agent after an honest reader's: it sends each source agent pin messages
// of one kind (`renew` or `release`) naming guessed grant ids, tagged under the only secret it has (a
// random one of its own), reports `sent` and stays until killed.
import { ClusterSecret } from '@kvreuse/discovery';
import { loadTransport } from '@kvreuse/native-bindings';
import { sealPinMessage } from '../../src/pin-auth.js';

const [readerName = '', sourceMetadata = '', kind = 'release', countArgument = '3'] = process.argv.slice(2);
if (kind !== 'release' && kind !== 'renew') throw new Error(`kind ${kind} is neither release nor renew`);
const agent = await loadTransport().createAgent({ name: readerName, backend: 'ucx' });
const ownSecret = ClusterSecret.ofThisProcess();
const peers = sourceMetadata.split(',').map((metadata) => agent.loadPeer(Buffer.from(metadata, 'base64')));
let sent = 0;
for (const peer of peers) {
  for (let guess = 1; guess <= Number(countArgument); guess++) {
    const message = { kind, pinId: `pin-${guess}`, sequence: 1000 + guess } as const;
    agent.sendNotification(peer, sealPinMessage(ownSecret, agent.name, peer.name, message));
    sent++;
  }
}
process.stdout.write(`${JSON.stringify({ event: 'sent', sent })}\n`);
setInterval(() => {}, 1 << 30);
