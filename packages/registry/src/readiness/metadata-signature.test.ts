import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterSecret } from '../discovery/cluster-secret.js';
import { TransportMetadataRefusedError } from '../errors.js';
import { signMetadata, verifiedMetadata } from './metadata-signature.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-signature-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function secret(name: string, fill: string): ClusterSecret {
  writeFileSync(join(dir, name), fill.repeat(32), { mode: 0o600 });
  return ClusterSecret.read(join(dir, name));
}

const ours = secret('ours', 'o');
const theirs = secret('theirs', 't');
const blob = Buffer.concat([Buffer.from('KVTM'), Buffer.from(Array.from({ length: 60 }, (_, i) => i))]);
const refusal = (kind: TransportMetadataRefusedError['refusal'], reason: RegExp) =>
  expect.objectContaining({ code: 'TRANSPORT_METADATA_REFUSED', agentName: 'src-agent', refusal: kind, message: expect.stringMatching(reason) });

describe('signed transport metadata', () => {
  it('is the blob behind a header and its HMAC-SHA256, and verifies to the very blob under the same secret', () => {
    const signed = signMetadata(ours, blob);
    expect(signed.subarray(0, 8)).toEqual(Buffer.from([0x4b, 0x56, 0x54, 0x53, 1, 0, 32, 0]));
    expect(signed.subarray(8, 40)).toEqual(ours.sign(signed.subarray(0, 8), blob));
    expect(signed.subarray(40)).toEqual(blob);
    expect(Buffer.from(verifiedMetadata(ours, 'src-agent', signed))).toEqual(blob);
  });

  it('refuses a bare blob as unsigned', () => {
    expect(() => verifiedMetadata(ours, 'src-agent', blob)).toThrow(refusal('unsigned', /\(unsigned\): it carries no signature.*no byte of it reached the transport/));
    expect(() => verifiedMetadata(ours, 'src-agent', blob)).toThrow(TransportMetadataRefusedError);
  });

  it('refuses a blob signed with another secret, naming the secret it was checked against', () => {
    expect(() => verifiedMetadata(ours, 'src-agent', signMetadata(theirs, blob))).toThrow(
      refusal('wrong-signature', new RegExp(`not one of the cluster secret ${join(dir, 'ours')}: it was signed with another secret, or altered after signing`)),
    );
  });

  it('refuses every cut short: a header or signature cut as truncated, a blob cut as a wrong signature', () => {
    const signed = signMetadata(ours, blob);
    for (let length = 0; length < signed.length; length++) {
      const cut = signed.subarray(0, length);
      expect(() => verifiedMetadata(ours, 'src-agent', cut)).toThrow(refusal(length <= 40 ? 'truncated' : 'wrong-signature', /./));
    }
  });

  it('refuses every single flipped bit: in the header as malformed, anywhere else as a wrong signature', () => {
    const signed = signMetadata(ours, blob);
    for (let byte = 0; byte < signed.length; byte++) {
      for (let bit = 0; bit < 8; bit++) {
        const tampered = Buffer.from(signed);
        tampered[byte]! ^= 1 << bit;
        expect(() => verifiedMetadata(ours, 'src-agent', tampered)).toThrow(refusal(byte < 8 ? 'malformed' : 'wrong-signature', /./));
      }
    }
  });
});
