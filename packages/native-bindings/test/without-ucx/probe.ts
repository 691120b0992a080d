// Runs where UCX's libucp.so.0 cannot be loaded (test/without-ucx.test.ts): reports the backends the
// library offers, whether a loopback read delivered every byte, and how creating a ucx agent fails.
import { NativeTransportError } from '@kvreuse/native-bindings';
import { agentName, transport } from '../support/backends.js';
import { emit } from '../support/child.js';
import { findPatternMismatch, piecewiseDescriptors } from '../support/content.js';
import { openPair, readRequest } from '../support/pair.js';

const bytes = 1 << 20;
const seed = 14;
const pair = await openPair('loopback', bytes, seed);
const operation = pair.reader.post(readRequest(pair, piecewiseDescriptors(4, bytes / 4)));
const { bytesDone } = await operation.done;
operation.release();
const mismatchAt = findPatternMismatch(pair.readerBank.view(), seed);
await pair.close();

let ucx: Record<string, unknown> = { created: true };
try {
  await (await transport.createAgent({ name: agentName('without-ucx'), backend: 'ucx' })).close();
} catch (error) {
  ucx =
    error instanceof NativeTransportError
      ? { code: error.code, call: error.call, detail: error.detail }
      : { other: String(error) };
}
emit({ event: 'report', backends: transport.capabilities().backends, bytesDone: Number(bytesDone), mismatchAt, ucx });
