import type { ClusterSecret } from '../discovery/cluster-secret.js';
import { TransportMetadataRefusedError } from '../errors.js';

/**
 * Signed transport metadata, as a rank part carries it (little-endian):
 * "KVTS" | u16 version | u16 signature length (32) | HMAC-SHA256 | metadata blob.
 * The signature covers the 8 header bytes and the blob.
 */
const SIGNED_MAGIC = Buffer.from('KVTS');
const SIGNED_VERSION = 1;
const SIGNATURE_BYTES = 32;
const HEADER_BYTES = 8;
/** A native metadata blob starts with this: metadata published by a process that signs nothing. */
const UNSIGNED_MAGIC = Buffer.from('KVTM');

function signedHeader(): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  SIGNED_MAGIC.copy(header, 0);
  header.writeUInt16LE(SIGNED_VERSION, 4);
  header.writeUInt16LE(SIGNATURE_BYTES, 6);
  return header;
}

/** The agent's metadata blob with its signature under `secret` in front. */
export function signMetadata(secret: ClusterSecret, blob: Uint8Array): Buffer {
  const header = signedHeader();
  return Buffer.concat([header, secret.sign(header, blob), blob]);
}

/**
 * The metadata blob inside `signed` once its signature under `secret` checks out; refuses (typed, naming
 * `agentName`) a bare blob, a truncated or unknown envelope, and a signature of another secret or over
 * other bytes. Nothing of a refused blob should reach the native layer.
 */
export function verifiedMetadata(secret: ClusterSecret, agentName: string, signed: Uint8Array): Uint8Array {
  const bytes = Buffer.from(signed.buffer, signed.byteOffset, signed.byteLength);
  const refuse = (refusal: TransportMetadataRefusedError['refusal'], reason: string): never => {
    throw new TransportMetadataRefusedError(agentName, refusal, reason);
  };
  if (bytes.subarray(0, 4).equals(UNSIGNED_MAGIC)) {
    refuse('unsigned', `it carries no signature: its publisher does not sign metadata (a kvreuse older than signing, or another cluster's tool)`);
  }
  if (bytes.length < HEADER_BYTES + SIGNATURE_BYTES + 1) {
    refuse('truncated', `${bytes.length} bytes, fewer than a signature header, signature and blob (${HEADER_BYTES + SIGNATURE_BYTES + 1})`);
  }
  const header = bytes.subarray(0, HEADER_BYTES);
  if (!header.subarray(0, 4).equals(SIGNED_MAGIC) || header.readUInt16LE(4) !== SIGNED_VERSION || header.readUInt16LE(6) !== SIGNATURE_BYTES) {
    refuse('malformed', `not version ${SIGNED_VERSION} signed metadata (header ${header.toString('hex')})`);
  }
  const blob = bytes.subarray(HEADER_BYTES + SIGNATURE_BYTES);
  if (!secret.verifies(bytes.subarray(HEADER_BYTES, HEADER_BYTES + SIGNATURE_BYTES), header, blob)) {
    refuse('wrong-signature', `its signature is not one of the cluster secret ${secret.origin}: it was signed with another secret, or altered after signing`);
  }
  return blob;
}
