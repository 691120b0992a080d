import { encodePinMessage, parsePinMessage } from '@kvreuse/endpoint';

const bytes = encodePinMessage({
  kind: 'grant',
  pinId: 'request-1',
  grantId: 'grant-1',
  sourceBlocks: Uint32Array.of(17, 18, 40),
  leaseMs: 5_000,
});
const parsed = parsePinMessage(bytes);
if (parsed.kind !== 'grant') throw new Error(`parsed a ${parsed.kind}`);
console.log(
  JSON.stringify({
    kind: parsed.kind,
    pinId: parsed.pinId,
    grantId: parsed.grantId,
    sourceBlocks: [...parsed.sourceBlocks],
    leaseMs: parsed.leaseMs,
  }),
);
