import { createHash } from 'node:crypto';
import { describeValue } from '@kvreuse/errors';
import { type RankPart, rankPartVersions, safeParseRankPart } from '@kvreuse/descriptors';
import { RankPartRefusedError } from './errors.js';
import { isEpoch } from './incarnation-epoch.js';
import { parseRankPartKey } from './rank-part-keys.js';

/**
 * What a rank part is stored as: the wire part inside an envelope that says what it is, carries
 * the epoch of the incarnation that published it, and its checksum.
 */
export interface RankPartRecord {
  readonly format: typeof rankPartRecordFormat;
  readonly version: typeof rankPartRecordVersion;
  /** The incarnation's epoch (`claimIncarnationEpoch`): a part of a larger epoch is of a newer incarnation. */
  readonly epoch: number;
  /** SHA-256 (hex) of the epoch in decimal, a newline, and the JSON text of `part` as stored: both are covered. */
  readonly sha256: string;
  readonly part: unknown;
}

export const rankPartRecordFormat = 'kvreuse.rank-part';
/** Version 3: the checksum covers the epoch too (version 2's covered the part alone). */
export const rankPartRecordVersion = 3;

/** A rank part as read from discovery, with the epoch of the incarnation that published it. */
export interface StoredRankPart {
  readonly part: RankPart;
  readonly epoch: number;
}

/**
 * Encodes a parsed rank part (the output of `parseRankPart` / `buildRankPart`) as a record. The wire
 * form is the part with its 64-bit quantities as decimal strings, as `serializeRankPart` writes it;
 * written directly, because re-running the schema's encoder costs more than the rest of publication.
 */
export function encodeRankPartRecord(part: RankPart, epoch: number): string {
  const partText = JSON.stringify(part, (_key, value: unknown) =>
    typeof value === 'bigint' ? value.toString() : value,
  );
  return recordText(epoch, recordChecksum(epoch, partText), partText);
}

/** The record's checksum: over the epoch as well as the part, so that a changed epoch is caught as a changed part is. */
function recordChecksum(epoch: number, partText: string): string {
  return createHash('sha256').update(`${epoch}\n${partText}`).digest('hex');
}

/** Spliced as text so that the checksum covers exactly the bytes a reader will see. */
function recordText(epoch: number, checksum: string, partText: string): string {
  return `{"format":"${rankPartRecordFormat}","version":${rankPartRecordVersion},"epoch":${epoch},"sha256":"${checksum}","part":${partText}}`;
}

export type RankPartRecordResult =
  { success: true; data: StoredRankPart } | { success: false; error: RankPartRefusedError };

/**
 * Validates a stored rank-part record like any untrusted input: the envelope, its version, the
 * checksum, the part against the descriptors schema, and that the part is stored under its own key.
 */
export function safeDecodeRankPartRecord(key: string, value: Uint8Array, keyPrefix?: string): RankPartRecordResult {
  const refuse = (refusal: RankPartRefusedError['refusal'], reason: string, cause?: unknown): RankPartRecordResult => ({
    success: false,
    error: new RankPartRefusedError(key, refusal, reason, cause === undefined ? undefined : { cause }),
  });
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(value);
  } catch (cause) {
    return refuse('malformed', 'the value is not UTF-8 text', cause);
  }
  let record: unknown;
  try {
    record = JSON.parse(text);
  } catch (cause) {
    return refuse('malformed', 'the value is not JSON', cause);
  }
  if (
    typeof record !== 'object' ||
    record === null ||
    (record as { format?: unknown }).format !== rankPartRecordFormat
  ) {
    return refuse('malformed', `the value is not a ${rankPartRecordFormat} record`);
  }
  const { version, epoch, sha256: checksum, part } = record as Partial<RankPartRecord>;
  if (version !== rankPartRecordVersion) {
    return refuse(
      'wrong-version',
      `record version ${describeValue(version)}; this reader knows version ${rankPartRecordVersion}`,
    );
  }
  if (!isEpoch(epoch))
    return refuse('malformed', `the record's epoch ${describeValue(epoch)} is not a whole number ≥ 1`);
  if (typeof checksum !== 'string' || typeof part !== 'object' || part === null) {
    return refuse('malformed', 'the record lacks its sha256 or part');
  }
  const partText = JSON.stringify(part);
  if (recordChecksum(epoch, partText) !== checksum) {
    return refuse('tampered', `the epoch and part do not match their sha256 ${checksum}`);
  }
  // JSON reads bytes the checksum never saw as the same value (`-0` as 0's twin, `1.0`, spaces, escapes):
  // the record must be the very text its writer encoded.
  if (text !== recordText(epoch, checksum, partText)) {
    return refuse('tampered', `the record's bytes are not those its writer encoded with sha256 ${checksum}`);
  }
  const partVersion = (part as { version?: unknown }).version;
  if (!(rankPartVersions as readonly unknown[]).includes(partVersion)) {
    return refuse(
      'wrong-version',
      `rank part version ${describeValue(partVersion)}; this reader knows versions ${rankPartVersions.join(', ')}`,
    );
  }
  const parsed = safeParseRankPart(part);
  if (!parsed.success) return refuse('malformed', parsed.error.message, parsed.error);
  const place = parseRankPartKey(key, keyPrefix);
  const { workerId, incarnation, parallel } = parsed.data;
  if (
    place === undefined ||
    place.workerId !== workerId ||
    place.incarnation !== incarnation ||
    place.tpRank !== parallel.tpRank ||
    place.ppRank !== parallel.ppRank
  ) {
    return refuse(
      'misplaced',
      `the part of worker ${JSON.stringify(workerId)} incarnation ${JSON.stringify(incarnation)} rank (tp ${parallel.tpRank}, pp ${parallel.ppRank}) is not stored under its own key`,
    );
  }
  return { success: true, data: { part: parsed.data, epoch } };
}

export function decodeRankPartRecord(key: string, value: Uint8Array, keyPrefix?: string): StoredRankPart {
  const result = safeDecodeRankPartRecord(key, value, keyPrefix);
  if (!result.success) throw result.error;
  return result.data;
}
