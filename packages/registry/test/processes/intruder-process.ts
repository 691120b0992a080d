// A process that can read discovery (the shared SQLite file) but does not hold the cluster secret, trying
// what an intruder would to read a serving worker's memory: load the worker's peer through kvreuse with a
// secret of its own, then hand the native layer the published bytes itself — the whole envelope, and the
// bytes behind its slot, where a signed (not sealed) envelope kept the readable blob. Prints one JSON line:
// the refusal, each raw attempt's outcome, whether any of the agent's metadata magic appears in what it
// read, and its live peers (0: nothing to post a READ to).
// Arguments: <sqlite path> <secret file of its own> <victim workerId>
import { loadTransport } from '@kvreuse/native-bindings';
import { ClusterSecret, openSqliteDiscovery } from '@kvreuse/discovery';
import { loadRankPeer, type RegistryError } from '../../src/index.js';
import { whenReady } from '../helpers/ready-worker.js';

const [location, secretFile, victim] = process.argv.slice(2);
if (victim === undefined) throw new Error('usage: intruder-process <sqlite path> <secret file> <victim workerId>');

const store = openSqliteDiscovery(location!);
const agent = await loadTransport().createAgent({ name: `intruder-${process.pid}`, backend: 'ucx' });
const part = (await whenReady(store, victim)).worker.ranks[0]!;
const published = Buffer.from(part.transport.metadata, 'base64');

let refusal: { code?: string | undefined; refusal?: string | undefined } = {};
try {
  (await loadRankPeer(agent, part, ClusterSecret.readOrCreate(secretFile!))).unload();
} catch (error) {
  const { code, refusal: why } = error as RegistryError & { refusal?: string };
  refusal = { code, refusal: why };
}
/** Hands the native layer `bytes` as if they were a metadata blob: its error code, or 'loaded'. */
const rawLoad = (bytes: Uint8Array): string => {
  try {
    agent.loadPeer(bytes).unload();
    return 'loaded';
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
};
const slotEnd = 38 + published.readUInt16LE(8);
process.stdout.write(
  `${JSON.stringify({
    ...refusal,
    wholeEnvelope: rawLoad(published),
    behindSlot: rawLoad(published.subarray(slotEnd)),
    blobMagicSeen: published.includes(Buffer.from('KVTM')),
    livePeers: agent.counters().livePeers,
  })}\n`,
);
await agent.close();
await store.close();
