// The pin protocol's messages and their versioned binary codec. Each message, with the authentication
// tag pin-auth.ts appends, fits one native notification (4096 bytes), so a pin names at most
// `maxPinBlocks` blocks. A request and its answer (grant or refuse) name the reader's request id; every
// later message names the grant id the source drew.
import type { RankId } from '@kvreuse/descriptors';
import { EndpointOptionError, PinMessageError, PinTooLargeError } from './errors.js';

export const pinMessageVersion = 2;
/** A message's bytes before its authentication tag (see pin-auth.ts). */
export const maxPinMessageBytes = 4096 - 16;
/** The longest pin id, worker id or incarnation a message carries, in UTF-8 bytes. */
export const maxPinNameBytes = 64;

export const pinRefusalReasons = [
  'evicted',
  'hash-mismatch',
  'shutting-down',
  'stale-epoch',
  'stale-incarnation',
  'too-large',
  'unknown-pin',
  // The source's memory belongs to an engine that went away (an adoption sidecar's banks); appended, so
  // the codes before it keep their numbers.
  'engine-gone',
] as const;
export type PinRefusalReason = (typeof pinRefusalReasons)[number];
export const pinRevocationReasons = ['evicted', 'shutting-down', 'engine-gone'] as const;
export type PinRevocationReason = (typeof pinRevocationReasons)[number];

export interface PinRequestMessage {
  readonly kind: 'request';
  readonly pinId: string;
  readonly reader: { readonly workerId: string; readonly incarnation: string; readonly rank: RankId };
  /** The source the reader expects: a grant from another incarnation or epoch is refused. */
  readonly source: { readonly incarnation: string; readonly epoch: number };
  /** Position of the first requested block in the prompt's chain. */
  readonly start: number;
  /** The chain hashes of the requested blocks, in position order from `start`. */
  readonly hashes: BigUint64Array;
  readonly wantsChecksums: boolean;
}
export interface PinGrantMessage {
  readonly kind: 'grant';
  /** The request's id. */
  readonly pinId: string;
  /** The id the source drew at random for this pin: what renewals, releases and revocations name. */
  readonly grantId: string;
  /** Source block index per granted block; its length is the granted count. */
  readonly sourceBlocks: Uint32Array;
  readonly checksums?: Uint32Array;
  readonly leaseMs: number;
}
export interface PinRefuseMessage {
  readonly kind: 'refuse';
  readonly pinId: string;
  readonly reason: PinRefusalReason;
}
export interface PinRenewedMessage {
  readonly kind: 'renewed';
  readonly pinId: string;
  readonly leaseMs: number;
}
export interface PinRevokeMessage {
  readonly kind: 'revoke';
  readonly pinId: string;
  readonly reason: PinRevocationReason;
}
/** A reader's renewal or release of its grant: `sequence` rises with each one, so a replayed one is refused. */
export interface PinSequencedMessage {
  readonly kind: 'renew' | 'release';
  readonly pinId: string;
  readonly sequence: number;
}
export interface PinReleasedMessage {
  readonly kind: 'released';
  readonly pinId: string;
}
export type PinMessage =
  | PinRequestMessage
  | PinGrantMessage
  | PinRefuseMessage
  | PinRenewedMessage
  | PinRevokeMessage
  | PinSequencedMessage
  | PinReleasedMessage;
export type PinMessageKind = PinMessage['kind'];

const kinds: readonly PinMessageKind[] = [
  'request',
  'grant',
  'refuse',
  'renew',
  'renewed',
  'release',
  'released',
  'revoke',
];
const MAGIC = 0x4b50; // "KP"
const HEADER_BYTES = 4;
/** A request with every name at its longest, before its hashes. */
const REQUEST_FIXED_BYTES = HEADER_BYTES + 4 * (1 + maxPinNameBytes) + 2 + 2 + 4 + 4 + 2 + 1;
/** The most blocks one pin may name: what the largest request carries (a grant's blocks take no more room). */
export const maxPinBlocks = Math.floor((maxPinMessageBytes - REQUEST_FIXED_BYTES) / 8);

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

class Writer {
  readonly bytes = new Uint8Array(maxPinMessageBytes);
  readonly view = new DataView(this.bytes.buffer);
  offset = 0;
  u8(value: number): void {
    this.view.setUint8(this.offset, value);
    this.offset += 1;
  }
  u16(value: number): void {
    this.view.setUint16(this.offset, value, true);
    this.offset += 2;
  }
  u32(value: number): void {
    this.view.setUint32(this.offset, value, true);
    this.offset += 4;
  }
  u64(value: bigint): void {
    this.view.setBigUint64(this.offset, value, true);
    this.offset += 8;
  }
  name(field: string, value: string): void {
    const encoded = encoder.encode(value);
    if (encoded.length === 0 || encoded.length > maxPinNameBytes)
      throw new EndpointOptionError(field, value, `1 to ${maxPinNameBytes} UTF-8 bytes`);
    this.u8(encoded.length);
    this.bytes.set(encoded, this.offset);
    this.offset += encoded.length;
  }
}

class Reader {
  readonly view: DataView;
  offset = 0;
  constructor(readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  #take(count: number, what: string): number {
    if (this.offset + count > this.bytes.length)
      throw new PinMessageError(
        `truncated: ${what} needs ${count} bytes at offset ${this.offset} of ${this.bytes.length}`,
      );
    const at = this.offset;
    this.offset += count;
    return at;
  }
  u8(what: string): number {
    return this.view.getUint8(this.#take(1, what));
  }
  u16(what: string): number {
    return this.view.getUint16(this.#take(2, what), true);
  }
  u32(what: string): number {
    return this.view.getUint32(this.#take(4, what), true);
  }
  flag(what: string): boolean {
    const value = this.u8(what);
    if (value > 1) throw new PinMessageError(`${what} is ${value}, not 0 or 1`);
    return value === 1;
  }
  name(what: string): string {
    const length = this.u8(`${what} length`);
    if (length === 0 || length > maxPinNameBytes)
      throw new PinMessageError(`${what} is ${length} bytes, not 1 to ${maxPinNameBytes}`);
    const at = this.#take(length, what);
    try {
      return decoder.decode(this.bytes.subarray(at, at + length));
    } catch {
      throw new PinMessageError(`${what} is not UTF-8`);
    }
  }
  u32s(count: number, what: string): Uint32Array {
    const at = this.#take(4 * count, what);
    const values = new Uint32Array(count);
    for (let index = 0; index < count; index++) values[index] = this.view.getUint32(at + 4 * index, true);
    return values;
  }
  u64s(count: number, what: string): BigUint64Array {
    const at = this.#take(8 * count, what);
    const values = new BigUint64Array(count);
    for (let index = 0; index < count; index++) values[index] = this.view.getBigUint64(at + 8 * index, true);
    return values;
  }
  blockCount(what: string): number {
    const count = this.u16(what);
    if (count > maxPinBlocks)
      throw new PinMessageError(`${what} is ${count}, more than ${maxPinBlocks} blocks per pin`);
    return count;
  }
  code<T extends string>(codes: readonly T[], what: string): T {
    const value = this.u8(what);
    const code = codes[value];
    if (code === undefined) throw new PinMessageError(`${what} ${value} is not one of ${codes.length} known codes`);
    return code;
  }
}

function checkBlockCount(count: number): void {
  if (count > maxPinBlocks) throw new PinTooLargeError(count, maxPinBlocks);
}

function checkWhole(field: string, value: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < 0 || value > max)
    throw new EndpointOptionError(field, value, `a whole number 0 to ${max}`);
}

/** Whether `bytes` start as a pin message does (any other notification is another protocol's). */
export function looksLikePinMessage(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && new DataView(bytes.buffer, bytes.byteOffset, 2).getUint16(0, true) === MAGIC;
}

/** The message's bytes. Throws PinTooLargeError for a pin of more than `maxPinBlocks` blocks. */
export function encodePinMessage(message: PinMessage): Uint8Array {
  const writer = new Writer();
  writer.u16(MAGIC);
  writer.u8(pinMessageVersion);
  writer.u8(kinds.indexOf(message.kind));
  writer.name('pinId', message.pinId);
  switch (message.kind) {
    case 'request':
      checkBlockCount(message.hashes.length);
      checkWhole('reader.rank.tpRank', message.reader.rank.tpRank, 0xffff);
      checkWhole('reader.rank.ppRank', message.reader.rank.ppRank, 0xffff);
      checkWhole('source.epoch', message.source.epoch, 0xffffffff);
      checkWhole('start', message.start, 0xffffffff);
      writer.name('reader.workerId', message.reader.workerId);
      writer.name('reader.incarnation', message.reader.incarnation);
      writer.u16(message.reader.rank.tpRank);
      writer.u16(message.reader.rank.ppRank);
      writer.name('source.incarnation', message.source.incarnation);
      writer.u32(message.source.epoch);
      writer.u32(message.start);
      writer.u16(message.hashes.length);
      writer.u8(message.wantsChecksums ? 1 : 0);
      for (const hash of message.hashes) writer.u64(hash);
      break;
    case 'grant':
      checkBlockCount(message.sourceBlocks.length);
      checkWhole('leaseMs', message.leaseMs, 0xffffffff);
      if (message.checksums !== undefined && message.checksums.length !== message.sourceBlocks.length) {
        throw new EndpointOptionError(
          'checksums',
          message.checksums.length,
          `one per granted block (${message.sourceBlocks.length})`,
        );
      }
      writer.name('grantId', message.grantId);
      writer.u16(message.sourceBlocks.length);
      writer.u8(message.checksums === undefined ? 0 : 1);
      writer.u32(message.leaseMs);
      for (const block of message.sourceBlocks) writer.u32(block);
      for (const checksum of message.checksums ?? []) writer.u32(checksum);
      break;
    case 'refuse':
      writer.u8(pinRefusalReasons.indexOf(message.reason));
      break;
    case 'revoke':
      writer.u8(pinRevocationReasons.indexOf(message.reason));
      break;
    case 'renewed':
      checkWhole('leaseMs', message.leaseMs, 0xffffffff);
      writer.u32(message.leaseMs);
      break;
    case 'renew':
    case 'release':
      checkWhole('sequence', message.sequence, 0xffffffff);
      writer.u32(message.sequence);
      break;
    default:
      break;
  }
  return writer.bytes.slice(0, writer.offset);
}

/** The message in `bytes`; throws PinMessageError naming what is wrong (nothing else). */
export function parsePinMessage(bytes: Uint8Array): PinMessage {
  const reader = new Reader(bytes);
  const magic = reader.u16('magic');
  if (magic !== MAGIC) throw new PinMessageError(`magic is 0x${magic.toString(16)}, not a pin message`);
  const version = reader.u8('version');
  if (version !== pinMessageVersion)
    throw new PinMessageError(`version ${version} is not the version ${pinMessageVersion} this build reads`);
  const kind = reader.code(kinds, 'kind');
  const pinId = reader.name('pinId');
  let message: PinMessage;
  switch (kind) {
    case 'request': {
      const workerId = reader.name('reader.workerId');
      const incarnation = reader.name('reader.incarnation');
      const rank = { tpRank: reader.u16('reader.rank.tpRank'), ppRank: reader.u16('reader.rank.ppRank') };
      const source = { incarnation: reader.name('source.incarnation'), epoch: reader.u32('source.epoch') };
      const start = reader.u32('start');
      const count = reader.blockCount('block count');
      const wantsChecksums = reader.flag('wants checksums');
      message = {
        kind,
        pinId,
        reader: { workerId, incarnation, rank },
        source,
        start,
        hashes: reader.u64s(count, 'hashes'),
        wantsChecksums,
      };
      break;
    }
    case 'grant': {
      const grantId = reader.name('grantId');
      const count = reader.blockCount('granted count');
      const hasChecksums = reader.flag('has checksums');
      const leaseMs = reader.u32('leaseMs');
      const sourceBlocks = reader.u32s(count, 'source blocks');
      message = hasChecksums
        ? { kind, pinId, grantId, sourceBlocks, checksums: reader.u32s(count, 'checksums'), leaseMs }
        : { kind, pinId, grantId, sourceBlocks, leaseMs };
      break;
    }
    case 'refuse':
      message = { kind, pinId, reason: reader.code(pinRefusalReasons, 'refusal reason') };
      break;
    case 'revoke':
      message = { kind, pinId, reason: reader.code(pinRevocationReasons, 'revocation reason') };
      break;
    case 'renewed':
      message = { kind, pinId, leaseMs: reader.u32('leaseMs') };
      break;
    case 'renew':
    case 'release':
      message = { kind, pinId, sequence: reader.u32('sequence') };
      break;
    default:
      message = { kind, pinId };
  }
  if (reader.offset !== bytes.length)
    throw new PinMessageError(`${bytes.length - reader.offset} bytes after the ${kind} message`);
  return message;
}

export type SafeParsedPinMessage =
  { readonly success: true; readonly data: PinMessage } | { readonly success: false; readonly error: PinMessageError };

/** `parsePinMessage` that returns its typed error instead of throwing it. */
export function safeParsePinMessage(bytes: Uint8Array): SafeParsedPinMessage {
  try {
    return { success: true, data: parsePinMessage(bytes) };
  } catch (error) {
    if (error instanceof PinMessageError) return { success: false, error };
    throw error;
  }
}
