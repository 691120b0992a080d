import type { RankId } from '@kvreuse/descriptors';
import { type ClusterSecret, sealNonceBytes, sealTagBytes } from './cluster-secret.js';
import { TransportMetadataRefusedError } from './errors.js';
import type { WorkerIncarnation } from './rank-part-keys.js';

/**
 * The rank part metadata is sealed for: its worker, incarnation and rank (the discovery key it is
 * published under) and the agent it names. Metadata sealed for one slot is refused in any other, so a
 * valid envelope of one rank cannot be replayed under another rank's key.
 */
export interface MetadataSlot extends WorkerIncarnation, RankId {
  readonly agentName: string;
}

/**
 * Sealed transport metadata, as a rank part carries it (little-endian):
 * "KVTS" | u16 version (3) | u16 tag length (16) | u16 slot length | nonce (12) | AES-256-GCM tag | slot | ciphertext,
 * where the slot is the UTF-8 JSON array [workerId, incarnation, ppRank, tpRank, agentName] and the
 * ciphertext is the agent's metadata blob (worker address, remote keys) encrypted under a key derived
 * from the cluster secret. The tag authenticates the 10 header bytes and the slot as associated data.
 */
const SEALED_MAGIC = Buffer.from('KVTS');
const SEALED_VERSION = 3;
/** Version 1 signed the blob alone; version 2 signed it with its slot but left it readable. */
const SIGNED_VERSIONS: Readonly<Record<number, string>> = {
  1: 'signed the blob alone, not the rank part it is published in',
  2: "signed the blob but left it readable: whoever read discovery could load the agent's address and keys",
};
const HEADER_BYTES = 10;
const NONCE_OFFSET = HEADER_BYTES;
const TAG_OFFSET = NONCE_OFFSET + sealNonceBytes;
const SLOT_OFFSET = TAG_OFFSET + sealTagBytes;
/** A native metadata blob starts with this: metadata published by a process that seals nothing. */
const UNSEALED_MAGIC = Buffer.from('KVTM');
/** The purpose the sealing key is derived for (HKDF's info). */
const SEAL_PURPOSE = 'transport metadata v3';

function encodeSlot(slot: MetadataSlot): Buffer {
  return Buffer.from(JSON.stringify([slot.workerId, slot.incarnation, slot.ppRank, slot.tpRank, slot.agentName]));
}

function describeSlot(slot: Buffer): string {
  try {
    const [workerId, incarnation, ppRank, tpRank, agentName] = JSON.parse(slot.toString('utf8')) as unknown[];
    return `worker ${String(workerId)} incarnation ${String(incarnation)} rank pp${String(ppRank)}-tp${String(tpRank)} agent ${String(agentName)}`;
  } catch {
    return `an unreadable slot (${slot.length} bytes)`;
  }
}

/** The agent's metadata blob sealed under `secret` for `slot`: unreadable, and refused in any other slot. */
export function sealMetadata(secret: ClusterSecret, slot: MetadataSlot, blob: Uint8Array): Buffer {
  const encodedSlot = encodeSlot(slot);
  const header = Buffer.alloc(HEADER_BYTES);
  SEALED_MAGIC.copy(header, 0);
  header.writeUInt16LE(SEALED_VERSION, 4);
  header.writeUInt16LE(sealTagBytes, 6);
  header.writeUInt16LE(encodedSlot.length, 8);
  const sealed = secret.seal(SEAL_PURPOSE, blob, Buffer.concat([header, encodedSlot]));
  return Buffer.concat([header, sealed.nonce, sealed.tag, encodedSlot, sealed.ciphertext]);
}

/** The parts of a version 3 envelope, before it is opened. */
interface Envelope {
  readonly header: Buffer;
  readonly nonce: Buffer;
  readonly tag: Buffer;
  readonly slot: Buffer;
  readonly ciphertext: Buffer;
}

type EnvelopeRefusal = {
  readonly refusal: 'unsigned' | 'outdated-format' | 'truncated' | 'malformed';
  readonly reason: string;
};

/** Splits `bytes` into a version 3 envelope's parts, or says why they are not one. */
function splitEnvelope(bytes: Buffer): Envelope | EnvelopeRefusal {
  if (bytes.subarray(0, 4).equals(UNSEALED_MAGIC)) {
    return {
      refusal: 'unsigned',
      reason: `it is not sealed: its publisher neither seals nor signs metadata (a kvreuse older than signing, or another cluster's tool)`,
    };
  }
  const version = bytes.length >= 6 && bytes.subarray(0, 4).equals(SEALED_MAGIC) ? bytes.readUInt16LE(4) : undefined;
  const outdated = version === undefined ? undefined : SIGNED_VERSIONS[version];
  if (outdated !== undefined) {
    return {
      refusal: 'outdated-format',
      reason: `it is in envelope version ${version}, which ${outdated}; upgrade its publisher to a kvreuse that seals version ${SEALED_VERSION}`,
    };
  }
  if (bytes.length < SLOT_OFFSET + 1) {
    return {
      refusal: 'truncated',
      reason: `${bytes.length} bytes, fewer than a sealed header, nonce, tag and blob (${SLOT_OFFSET + 1})`,
    };
  }
  const header = bytes.subarray(0, HEADER_BYTES);
  if (
    !header.subarray(0, 4).equals(SEALED_MAGIC) ||
    header.readUInt16LE(4) !== SEALED_VERSION ||
    header.readUInt16LE(6) !== sealTagBytes
  ) {
    return {
      refusal: 'malformed',
      reason: `not version ${SEALED_VERSION} sealed metadata (header ${header.toString('hex')})`,
    };
  }
  const slotEnd = SLOT_OFFSET + header.readUInt16LE(8);
  if (bytes.length <= slotEnd)
    return {
      refusal: 'truncated',
      reason: `${bytes.length} bytes, not more than its header, nonce, tag and slot (${slotEnd})`,
    };
  return {
    header,
    nonce: bytes.subarray(NONCE_OFFSET, TAG_OFFSET),
    tag: bytes.subarray(TAG_OFFSET, SLOT_OFFSET),
    slot: bytes.subarray(SLOT_OFFSET, slotEnd),
    ciphertext: bytes.subarray(slotEnd),
  };
}

/** How sealed metadata splits into its (encrypted) metadata blob and the envelope around it (header, nonce, tag, slot). */
export interface SealedMetadataSizes {
  readonly blobBytes: number;
  readonly envelopeBytes: number;
}

/**
 * The sizes of the blob and the envelope of `sealed`, read without opening it (for reports; a peer is
 * loaded through `loadRankPeer` only), or `undefined` when it is not a version 3 envelope.
 */
export function sealedMetadataSizes(sealed: Uint8Array): SealedMetadataSizes | undefined {
  const envelope = splitEnvelope(Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength));
  return 'refusal' in envelope
    ? undefined
    : { blobBytes: envelope.ciphertext.length, envelopeBytes: sealed.byteLength - envelope.ciphertext.length };
}

/**
 * The metadata blob inside `sealed` once it opens under `secret` for `slot`; refuses (typed, naming
 * `slot.agentName`) a bare blob, a truncated, outdated (signed but readable) or unknown envelope, one
 * sealed under another secret or altered after sealing, and one sealed for another slot. Nothing of a
 * refused blob reaches the native layer, and without the secret nothing of it can be read.
 */
export function openSealedMetadata(secret: ClusterSecret, slot: MetadataSlot, sealed: Uint8Array): Uint8Array {
  const envelope = splitEnvelope(Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength));
  const refuse = (refusal: TransportMetadataRefusedError['refusal'], reason: string): never => {
    throw new TransportMetadataRefusedError(slot.agentName, refusal, reason);
  };
  if ('refusal' in envelope) return refuse(envelope.refusal, envelope.reason);
  const associated = Buffer.concat([envelope.header, envelope.slot]);
  const blob = secret.open(SEAL_PURPOSE, envelope, associated);
  if (blob === undefined) {
    return refuse(
      'wrong-signature',
      `it does not open under the cluster secret ${secret.origin}: it was sealed under another secret, or altered after sealing`,
    );
  }
  const expectedSlot = encodeSlot(slot);
  if (!envelope.slot.equals(expectedSlot)) {
    refuse(
      'other-slot',
      `it was sealed for ${describeSlot(envelope.slot)} but is published as ${describeSlot(expectedSlot)}`,
    );
  }
  return blob;
}
