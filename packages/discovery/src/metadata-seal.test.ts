import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterSecret } from './cluster-secret.js';
import { TransportMetadataRefusedError } from './errors.js';
import { openSealedMetadata, sealedMetadataSizes, sealMetadata } from './metadata-seal.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-seal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function secret(name: string, fill: string): ClusterSecret {
  writeFileSync(join(dir, name), fill.repeat(32), { mode: 0o600 });
  return ClusterSecret.read(join(dir, name));
}

const ours = secret('ours', 'o');
const theirs = secret('theirs', 't');
const blob = Buffer.concat([Buffer.from('KVTM'), Buffer.from(Array.from({ length: 60 }, (_, i) => i))]);
const slot = { workerId: 'worker-a', incarnation: 'inc-1', ppRank: 0, tpRank: 1, agentName: 'src-agent' };
const slotText = Buffer.from('["worker-a","inc-1",0,1,"src-agent"]');
/** Header 10, nonce 12, tag 16. */
const slotStart = 38;
const refusal = (kind: TransportMetadataRefusedError['refusal'], reason: RegExp) =>
  expect.objectContaining({
    code: 'TRANSPORT_METADATA_REFUSED',
    agentName: 'src-agent',
    refusal: kind,
    message: expect.stringMatching(reason),
  });

/** Whether any `window` consecutive bytes of `needle` appear in `haystack`. */
function sharesBytes(haystack: Buffer, needle: Buffer, window: number): boolean {
  for (let start = 0; start + window <= needle.length; start++) {
    if (haystack.includes(needle.subarray(start, start + window))) return true;
  }
  return false;
}

describe('sealed transport metadata', () => {
  it('is a header, a nonce, an AES-256-GCM tag, the slot and the encrypted blob, and opens to the very blob under the same secret and slot', () => {
    const sealed = sealMetadata(ours, slot, blob);
    expect(sealed.subarray(0, 10)).toEqual(Buffer.from([0x4b, 0x56, 0x54, 0x53, 3, 0, 16, 0, slotText.length, 0]));
    expect(sealed.subarray(slotStart, slotStart + slotText.length)).toEqual(slotText);
    expect(sealed.length).toBe(slotStart + slotText.length + blob.length);
    expect(Buffer.from(openSealedMetadata(ours, slot, sealed))).toEqual(blob);
  });

  it('hides the blob: no 4 bytes of it in a row appear, and two sealings of one blob differ (a fresh nonce each)', () => {
    const first = sealMetadata(ours, slot, blob);
    const ciphertext = first.subarray(slotStart + slotText.length);
    expect(sharesBytes(ciphertext, blob.subarray(0, 16), 4)).toBe(false);
    const second = sealMetadata(ours, slot, blob);
    expect(second.subarray(10, 22)).not.toEqual(first.subarray(10, 22));
    expect(second.subarray(slotStart + slotText.length)).not.toEqual(ciphertext);
  });

  it('refuses a blob sealed for another worker, incarnation, rank or agent, naming both slots', () => {
    const sealed = sealMetadata(ours, slot, blob);
    for (const other of [
      { workerId: 'worker-b' },
      { incarnation: 'inc-2' },
      { ppRank: 1 },
      { tpRank: 0 },
      { agentName: 'other-agent' },
    ]) {
      expect(() => openSealedMetadata(ours, { ...slot, ...other }, sealed)).toThrow(
        expect.objectContaining({
          code: 'TRANSPORT_METADATA_REFUSED',
          agentName: other.agentName ?? 'src-agent',
          refusal: 'other-slot',
          message: expect.stringContaining(
            'sealed for worker worker-a incarnation inc-1 rank pp0-tp1 agent src-agent but is published as worker ',
          ),
        }),
      );
    }
  });

  it('refuses signed envelopes (versions 1 and 2: the blob readable by anyone) as outdated, saying to upgrade the publisher', () => {
    for (const version of [1, 2]) {
      const header = Buffer.from([0x4b, 0x56, 0x54, 0x53, version, 0, 32, 0, slotText.length, 0]);
      const signed = Buffer.concat([header, ours.sign(header, slotText, blob), slotText, blob]);
      expect(() => openSealedMetadata(ours, slot, signed)).toThrow(
        refusal('outdated-format', new RegExp(`envelope version ${version}, which .*upgrade its publisher`)),
      );
    }
  });

  it('refuses a bare blob as unsealed', () => {
    expect(() => openSealedMetadata(ours, slot, blob)).toThrow(
      refusal('unsigned', /\(unsigned\): it is not sealed.*no byte of it reached the transport/),
    );
    expect(() => openSealedMetadata(ours, slot, blob)).toThrow(TransportMetadataRefusedError);
  });

  it('refuses metadata sealed under another secret, naming the secret it was opened with', () => {
    expect(() => openSealedMetadata(ours, slot, sealMetadata(theirs, slot, blob))).toThrow(
      refusal(
        'wrong-signature',
        new RegExp(`does not open under the cluster secret ${join(dir, 'ours')}: it was sealed under another secret`),
      ),
    );
  });

  it('refuses every cut short: a header, nonce, tag or slot cut as truncated, a blob cut as a wrong signature', () => {
    const sealed = sealMetadata(ours, slot, blob);
    const blobStart = sealed.length - blob.length;
    for (let length = 0; length < sealed.length; length++) {
      expect(() => openSealedMetadata(ours, slot, sealed.subarray(0, length))).toThrow(
        refusal(length <= blobStart ? 'truncated' : 'wrong-signature', /./),
      );
    }
  });

  it('refuses every single flipped bit: in the fixed header as malformed or outdated, a slot length past the end as cut short, anywhere else as a wrong signature', () => {
    const sealed = sealMetadata(ours, slot, blob);
    for (let byte = 0; byte < sealed.length; byte++) {
      for (let bit = 0; bit < 8; bit++) {
        const tampered = Buffer.from(sealed);
        tampered[byte]! ^= 1 << bit;
        const expected =
          byte === 4 && bit < 2
            ? 'outdated-format'
            : byte < 8
              ? 'malformed'
              : slotStart + tampered.readUInt16LE(8) >= sealed.length
                ? 'truncated'
                : 'wrong-signature';
        expect(() => openSealedMetadata(ours, slot, tampered)).toThrow(refusal(expected, /./));
      }
    }
  });

  it('splits into blob and envelope sizes without the secret, and names no sizes for what is not a version 3 envelope', () => {
    const sealed = sealMetadata(theirs, slot, blob);
    expect(sealedMetadataSizes(sealed)).toEqual({ blobBytes: blob.length, envelopeBytes: slotStart + slotText.length });
    expect(sealedMetadataSizes(blob)).toBeUndefined();
    expect(sealedMetadataSizes(sealed.subarray(0, sealed.length - blob.length))).toBeUndefined();
  });
});
