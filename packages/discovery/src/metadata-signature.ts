import type { RankId } from '@kvreuse/descriptors';
import type { ClusterSecret } from './cluster-secret.js';
import { TransportMetadataRefusedError } from './errors.js';
import type { WorkerIncarnation } from './rank-part-keys.js';

/**
 * The rank part a signature is made for: its worker, incarnation and rank (the discovery key it is
 * published under) and the agent it names. A signature made for one slot is refused in any other, so
 * a valid blob of one rank cannot be replayed under another rank's key.
 */
export interface MetadataSlot extends WorkerIncarnation, RankId {
  readonly agentName: string;
}

/**
 * Signed transport metadata, as a rank part carries it (little-endian):
 * "KVTS" | u16 version (2) | u16 signature length (32) | u16 slot length | HMAC-SHA256 | slot | metadata blob,
 * where the slot is the UTF-8 JSON array [workerId, incarnation, ppRank, tpRank, agentName].
 * The signature covers the 10 header bytes, the slot and the blob.
 */
const SIGNED_MAGIC = Buffer.from('KVTS');
const SIGNED_VERSION = 2;
/** Version 1 signed the blob alone, not the slot it was published for. */
const SLOTLESS_VERSION = 1;
const SIGNATURE_BYTES = 32;
const HEADER_BYTES = 10;
/** A native metadata blob starts with this: metadata published by a process that signs nothing. */
const UNSIGNED_MAGIC = Buffer.from('KVTM');

function encodeSlot(slot: MetadataSlot): Buffer {
  return Buffer.from(JSON.stringify([slot.workerId, slot.incarnation, slot.ppRank, slot.tpRank, slot.agentName]));
}

function describeSlot(slot: Buffer): string {
  const [workerId, incarnation, ppRank, tpRank, agentName] = JSON.parse(slot.toString('utf8')) as [
    string,
    string,
    number,
    number,
    string,
  ];
  return `worker ${workerId} incarnation ${incarnation} rank pp${ppRank}-tp${tpRank} agent ${agentName}`;
}

/** The agent's metadata blob with its slot and its signature under `secret` for that slot in front. */
export function signMetadata(secret: ClusterSecret, slot: MetadataSlot, blob: Uint8Array): Buffer {
  const encodedSlot = encodeSlot(slot);
  const header = Buffer.alloc(HEADER_BYTES);
  SIGNED_MAGIC.copy(header, 0);
  header.writeUInt16LE(SIGNED_VERSION, 4);
  header.writeUInt16LE(SIGNATURE_BYTES, 6);
  header.writeUInt16LE(encodedSlot.length, 8);
  return Buffer.concat([header, secret.sign(header, encodedSlot, blob), encodedSlot, blob]);
}

/** The parts of a version 2 envelope, before its signature is checked. */
interface Envelope {
  readonly header: Buffer;
  readonly signature: Buffer;
  readonly slot: Buffer;
  readonly blob: Buffer;
}

type EnvelopeRefusal = {
  readonly refusal: 'unsigned' | 'outdated-format' | 'truncated' | 'malformed';
  readonly reason: string;
};

/** Splits `bytes` into a version 2 envelope's parts, or says why they are not one. */
function openEnvelope(bytes: Buffer): Envelope | EnvelopeRefusal {
  if (bytes.subarray(0, 4).equals(UNSIGNED_MAGIC)) {
    return {
      refusal: 'unsigned',
      reason: `it carries no signature: its publisher does not sign metadata (a kvreuse older than signing, or another cluster's tool)`,
    };
  }
  if (bytes.length >= 6 && bytes.subarray(0, 4).equals(SIGNED_MAGIC) && bytes.readUInt16LE(4) === SLOTLESS_VERSION) {
    return {
      refusal: 'outdated-format',
      reason: `it is signed in envelope version ${SLOTLESS_VERSION}, whose signature does not cover the rank part it is published in; upgrade its publisher to a kvreuse that signs version ${SIGNED_VERSION}`,
    };
  }
  if (bytes.length < HEADER_BYTES + SIGNATURE_BYTES + 1) {
    return {
      refusal: 'truncated',
      reason: `${bytes.length} bytes, fewer than a signature header, signature and blob (${HEADER_BYTES + SIGNATURE_BYTES + 1})`,
    };
  }
  const header = bytes.subarray(0, HEADER_BYTES);
  if (
    !header.subarray(0, 4).equals(SIGNED_MAGIC) ||
    header.readUInt16LE(4) !== SIGNED_VERSION ||
    header.readUInt16LE(6) !== SIGNATURE_BYTES
  ) {
    return {
      refusal: 'malformed',
      reason: `not version ${SIGNED_VERSION} signed metadata (header ${header.toString('hex')})`,
    };
  }
  const slotEnd = HEADER_BYTES + SIGNATURE_BYTES + header.readUInt16LE(8);
  if (bytes.length <= slotEnd)
    return {
      refusal: 'truncated',
      reason: `${bytes.length} bytes, not more than its header, signature and slot (${slotEnd})`,
    };
  return {
    header,
    signature: bytes.subarray(HEADER_BYTES, HEADER_BYTES + SIGNATURE_BYTES),
    slot: bytes.subarray(HEADER_BYTES + SIGNATURE_BYTES, slotEnd),
    blob: bytes.subarray(slotEnd),
  };
}

/** How signed metadata splits into its metadata blob and the envelope in front of it (header, signature, slot). */
export interface SignedMetadataSizes {
  readonly blobBytes: number;
  readonly envelopeBytes: number;
}

/**
 * The sizes of the blob and the envelope of `signed`, read without checking the signature (for reports;
 * a peer is loaded through `loadRankPeer` only), or `undefined` when it is not a version 2 envelope.
 */
export function signedMetadataSizes(signed: Uint8Array): SignedMetadataSizes | undefined {
  const envelope = openEnvelope(Buffer.from(signed.buffer, signed.byteOffset, signed.byteLength));
  return 'refusal' in envelope
    ? undefined
    : { blobBytes: envelope.blob.length, envelopeBytes: signed.byteLength - envelope.blob.length };
}

/**
 * The metadata blob inside `signed` once its signature under `secret` for `slot` checks out; refuses
 * (typed, naming `slot.agentName`) a bare blob, a truncated, outdated or unknown envelope, a signature of
 * another secret or over other bytes, and a blob signed for another slot. Nothing of a refused blob
 * should reach the native layer.
 */
export function verifiedMetadata(secret: ClusterSecret, slot: MetadataSlot, signed: Uint8Array): Uint8Array {
  const envelope = openEnvelope(Buffer.from(signed.buffer, signed.byteOffset, signed.byteLength));
  const refuse = (refusal: TransportMetadataRefusedError['refusal'], reason: string): never => {
    throw new TransportMetadataRefusedError(slot.agentName, refusal, reason);
  };
  if ('refusal' in envelope) return refuse(envelope.refusal, envelope.reason);
  if (!secret.verifies(envelope.signature, envelope.header, envelope.slot, envelope.blob)) {
    refuse(
      'wrong-signature',
      `its signature is not one of the cluster secret ${secret.origin}: it was signed with another secret, or altered after signing`,
    );
  }
  const expectedSlot = encodeSlot(slot);
  if (!envelope.slot.equals(expectedSlot)) {
    refuse(
      'other-slot',
      `it was signed for ${describeSlot(envelope.slot)} but is published as ${describeSlot(expectedSlot)}`,
    );
  }
  return envelope.blob;
}
