// Process B of the cross-process proof: READs A's whole prefix as 2,352 descriptors of 131,072 bytes
// into its own registered bank and verifies every byte; checks the in-flight guards while the read
// is held by a completion delay, and that out-of-bounds descriptors move nothing.
import { type Agent, NativeTransportError, type PostRequest } from '@kvreuse/native-bindings';
import { transport } from '../support/backends.js';
import { emit, exitWithParent, nextMessageFromParent } from '../support/child.js';
import { findPatternMismatch, isFilledWith, piecewiseDescriptors } from '../support/content.js';
import { QWEN3_PIECE_BYTES, QWEN3_PREFIX_BYTES, QWEN3_PREFIX_PIECES } from '../support/qwen3.js';

exitWithParent();

const SENTINEL = 0x5a;

type Refusal = { code: string; call: string; detail: string } | 'accepted';

function refusalOf(error: unknown): Refusal {
  if (!(error instanceof NativeTransportError)) throw error;
  return { code: error.code, call: error.call, detail: error.detail };
}

function refusal(attempt: () => unknown): Refusal {
  try {
    attempt();
    return 'accepted';
  } catch (error) {
    return refusalOf(error);
  }
}

async function asyncRefusal(attempt: () => Promise<unknown>): Promise<Refusal> {
  return attempt().then(() => 'accepted' as const, refusalOf);
}

const [name = 'reader', seedText = '1'] = process.argv.slice(2);
const published = await nextMessageFromParent();

const agent: Agent = await transport.createAgent({ name, backend: 'ucx' });
const bank = await agent.allocate(QWEN3_PREFIX_BYTES);
bank.view().fill(SENTINEL);
const region = agent.register(bank);
const peer = agent.loadPeer(Buffer.from(String(published['metadata']), 'base64'));
// The blob alone says which region holds the prefix.
const advertised = peer.regions();
const prefixRegion = advertised.find((candidate) => candidate.bytes === QWEN3_PREFIX_BYTES);
if (prefixRegion === undefined) throw new Error(`reader: no advertised region of ${QWEN3_PREFIX_BYTES} bytes`);
const base = { direction: 'read', peer, localRegions: [region], remoteRegions: [prefixRegion.id] } as const;
const path = peer.transport();

// One descriptor of a batch past the end of the local region, then of the remote one.
const pastEnd = (field: 'sourceOffset' | 'destinationOffset'): PostRequest => {
  const descriptors = piecewiseDescriptors(3, QWEN3_PIECE_BYTES);
  descriptors[field][2] = BigInt(QWEN3_PREFIX_BYTES - QWEN3_PIECE_BYTES + 1);
  return { ...base, descriptors };
};
const outOfBounds = {
  local: refusal(() => agent.post(pastEnd('destinationOffset'))),
  remote: refusal(() => agent.post(pastEnd('sourceOffset'))),
  untouched: isFilledWith(bank.view(), SENTINEL),
  bytesMoved: agent.counters().bytesMoved,
};

agent.faults.delayCompletions('forever');
const operation = agent.post({
  ...base,
  descriptors: piecewiseDescriptors(QWEN3_PREFIX_PIECES, QWEN3_PIECE_BYTES),
  notification: `prefix read by ${name}`,
});
const whileInFlight = {
  state: operation.status().state,
  deregister: await asyncRefusal(() => region.deregister()),
  release: refusal(() => operation.release()),
  destroy: await asyncRefusal(() => agent.close()),
};
agent.faults.clear();
const result = await operation.done;
const mismatch = findPatternMismatch(bank.view(), Number(seedText));
const bytesMoved = agent.counters().bytesMoved;
operation.release();
await region.deregister();
await bank.free();
await agent.close();
emit({
  event: 'done',
  advertised: advertised.map(({ id, bytes, kind }) => ({ id, bytes, kind })),
  path,
  descriptors: operation.descriptorCount,
  outOfBounds,
  whileInFlight,
  result,
  mismatch,
  bytesMoved,
  counters: transport.counters(),
});
process.exit(0);
