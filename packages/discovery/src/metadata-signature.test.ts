import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterSecret } from './cluster-secret.js';
import { TransportMetadataRefusedError } from './errors.js';
import { signedMetadataSizes, signMetadata, verifiedMetadata } from './metadata-signature.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-signature-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function secret(name: string, fill: string): ClusterSecret {
  writeFileSync(join(dir, name), fill.repeat(32), { mode: 0o600 });
  return ClusterSecret.read(join(dir, name));
}

const ours = secret('ours', 'o');
const theirs = secret('theirs', 't');
const blob = Buffer.concat([Buffer.from('KVTM'), Buffer.from(Array.from({ length: 60 }, (_, i) => i))]);
const slot = { workerId: 'worker-a', incarnation: 'inc-1', ppRank: 0, tpRank: 1, agentName: 'src-agent' };
const refusal = (kind: TransportMetadataRefusedError['refusal'], reason: RegExp) =>
  expect.objectContaining({
    code: 'TRANSPORT_METADATA_REFUSED',
    agentName: 'src-agent',
    refusal: kind,
    message: expect.stringMatching(reason),
  });

describe('signed transport metadata', () => {
  it('is the blob behind a header, its HMAC-SHA256 and its slot, and verifies to the very blob under the same secret and slot', () => {
    const signed = signMetadata(ours, slot, blob);
    const slotText = Buffer.from('["worker-a","inc-1",0,1,"src-agent"]');
    expect(signed.subarray(0, 10)).toEqual(Buffer.from([0x4b, 0x56, 0x54, 0x53, 2, 0, 32, 0, slotText.length, 0]));
    expect(signed.subarray(10, 42)).toEqual(ours.sign(signed.subarray(0, 10), slotText, blob));
    expect(signed.subarray(42, 42 + slotText.length)).toEqual(slotText);
    expect(signed.subarray(42 + slotText.length)).toEqual(blob);
    expect(Buffer.from(verifiedMetadata(ours, slot, signed))).toEqual(blob);
  });

  it('refuses a blob signed for another worker, incarnation, rank or agent, naming both slots', () => {
    const signed = signMetadata(ours, slot, blob);
    const others = [
      { workerId: 'worker-b' },
      { incarnation: 'inc-2' },
      { ppRank: 1 },
      { tpRank: 0 },
      { agentName: 'other-agent' },
    ];
    for (const other of others) {
      expect(() => verifiedMetadata(ours, { ...slot, ...other }, signed)).toThrow(
        expect.objectContaining({
          code: 'TRANSPORT_METADATA_REFUSED',
          agentName: other.agentName ?? 'src-agent',
          refusal: 'other-slot',
          message: expect.stringContaining(
            'signed for worker worker-a incarnation inc-1 rank pp0-tp1 agent src-agent but is published as worker ',
          ),
        }),
      );
    }
    expect(() => verifiedMetadata(ours, { ...slot, tpRank: 0 }, signed)).toThrow(
      /published as worker worker-a incarnation inc-1 rank pp0-tp0 agent src-agent/,
    );
  });

  it('refuses a version 1 envelope (its signature covers the blob alone) as outdated, saying to upgrade its publisher', () => {
    const header = Buffer.from([0x4b, 0x56, 0x54, 0x53, 1, 0, 32, 0]);
    const version1 = Buffer.concat([header, ours.sign(header, blob), blob]);
    expect(() => verifiedMetadata(ours, slot, version1)).toThrow(
      refusal(
        'outdated-format',
        /\(outdated-format\): it is signed in envelope version 1, whose signature does not cover the rank part.*upgrade its publisher/,
      ),
    );
  });

  it('refuses a bare blob as unsigned', () => {
    expect(() => verifiedMetadata(ours, slot, blob)).toThrow(
      refusal('unsigned', /\(unsigned\): it carries no signature.*no byte of it reached the transport/),
    );
    expect(() => verifiedMetadata(ours, slot, blob)).toThrow(TransportMetadataRefusedError);
  });

  it('refuses a blob signed with another secret, naming the secret it was checked against', () => {
    expect(() => verifiedMetadata(ours, slot, signMetadata(theirs, slot, blob))).toThrow(
      refusal(
        'wrong-signature',
        new RegExp(
          `not one of the cluster secret ${join(dir, 'ours')}: it was signed with another secret, or altered after signing`,
        ),
      ),
    );
  });

  it('refuses every cut short: a header, signature or slot cut as truncated, a blob cut as a wrong signature', () => {
    const signed = signMetadata(ours, slot, blob);
    const blobStart = signed.length - blob.length;
    for (let length = 0; length < signed.length; length++) {
      const cut = signed.subarray(0, length);
      expect(() => verifiedMetadata(ours, slot, cut)).toThrow(
        refusal(length <= blobStart ? 'truncated' : 'wrong-signature', /./),
      );
    }
  });

  it('refuses every single flipped bit: in the fixed header as malformed, a slot length past the end as cut short, anywhere else as a wrong signature', () => {
    const signed = signMetadata(ours, slot, blob);
    for (let byte = 0; byte < signed.length; byte++) {
      for (let bit = 0; bit < 8; bit++) {
        const tampered = Buffer.from(signed);
        tampered[byte]! ^= 1 << bit;
        const expected =
          byte < 8 ? 'malformed' : 42 + tampered.readUInt16LE(8) >= signed.length ? 'truncated' : 'wrong-signature';
        expect(() => verifiedMetadata(ours, slot, tampered)).toThrow(refusal(expected, /./));
      }
    }
  });

  it('splits into blob and envelope sizes without the secret, and names no sizes for what is not a version 2 envelope', () => {
    const signed = signMetadata(theirs, slot, blob);
    expect(signedMetadataSizes(signed)).toEqual({
      blobBytes: blob.length,
      envelopeBytes: 10 + 32 + '["worker-a","inc-1",0,1,"src-agent"]'.length,
    });
    expect(signedMetadataSizes(blob)).toBeUndefined();
    expect(signedMetadataSizes(signed.subarray(0, signed.length - blob.length))).toBeUndefined();
  });
});
