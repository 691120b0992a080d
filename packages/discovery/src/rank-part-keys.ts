import type { RankId } from '@kvreuse/descriptors';
import { RankPartPublicationError } from './errors.js';

/** Where kvreuse keeps its keys in a discovery store unless told otherwise. */
export const defaultKeyPrefix = 'kvreuse/';

/** A worker and one of its incarnations: what names a set of rank parts. */
export interface WorkerIncarnation {
  readonly workerId: string;
  readonly incarnation: string;
}

const segment = '[A-Za-z0-9._:@-]{1,200}';
const segmentPattern = new RegExp(`^${segment}$`);

/** Worker ids and incarnations each become one key segment: letters, digits and `._:@-`, at most 200 characters. */
export function checkKeySegment(field: 'workerId' | 'incarnation', value: unknown): string {
  if (typeof value !== 'string' || !segmentPattern.test(value)) {
    throw new RankPartPublicationError(
      field,
      value,
      'must be 1–200 characters of letters, digits and ._:@- (it becomes a discovery key segment)',
    );
  }
  return value;
}

/** Everything kvreuse keeps about one worker (its rank parts and its epochs) lives under this prefix. */
export function workerKeyPrefix(workerId: string, keyPrefix = defaultKeyPrefix): string {
  return `${keyPrefix}workers/${checkKeySegment('workerId', workerId)}/`;
}

/** Every rank part of one worker, of any incarnation, lives under this prefix. */
export function workerPartsPrefix(workerId: string, keyPrefix = defaultKeyPrefix): string {
  return `${workerKeyPrefix(workerId, keyPrefix)}incarnations/`;
}

/**
 * The worker's epoch fence: its value is the incarnation that claimed the newest epoch, and its
 * modification revision is that epoch. Every fenced write compares it.
 */
export function workerEpochKey(workerId: string, keyPrefix = defaultKeyPrefix): string {
  return `${workerKeyPrefix(workerId, keyPrefix)}epoch`;
}

/** The record of one incarnation's claim: created once, at the revision that is the incarnation's epoch, never rewritten. */
export function incarnationEpochKey(worker: WorkerIncarnation, keyPrefix = defaultKeyPrefix): string {
  return `${workerKeyPrefix(worker.workerId, keyPrefix)}epochs/${checkKeySegment('incarnation', worker.incarnation)}`;
}

/** The rank parts of one incarnation: replacing an incarnation deletes exactly this prefix. */
export function incarnationPartsPrefix(worker: WorkerIncarnation, keyPrefix = defaultKeyPrefix): string {
  return `${workerPartsPrefix(worker.workerId, keyPrefix)}${checkKeySegment('incarnation', worker.incarnation)}/`;
}

export function rankPartKey(worker: WorkerIncarnation, rank: RankId, keyPrefix = defaultKeyPrefix): string {
  return `${incarnationPartsPrefix(worker, keyPrefix)}pp${rank.ppRank}-tp${rank.tpRank}`;
}

const keyPattern = new RegExp(
  `^workers/(${segment})/incarnations/(${segment})/pp(0|[1-9][0-9]{0,8})-tp(0|[1-9][0-9]{0,8})$`,
);

/** The worker, incarnation and rank a key names, or `undefined` for a key that is not a rank-part key. */
export function parseRankPartKey(key: string, keyPrefix = defaultKeyPrefix): (WorkerIncarnation & RankId) | undefined {
  if (!key.startsWith(keyPrefix)) return undefined;
  const match = keyPattern.exec(key.slice(keyPrefix.length));
  if (match === null) return undefined;
  const [, workerId = '', incarnation = '', pp = '', tp = ''] = match;
  return { workerId, incarnation, tpRank: Number(tp), ppRank: Number(pp) };
}

const rankPartKeyTail = new RegExp(
  `workers/(${segment})/incarnations/${segment}/pp(0|[1-9][0-9]{0,8})-tp(0|[1-9][0-9]{0,8})$`,
);

/** The worker whose rank-part key this is, under any key prefix, or `undefined` for a key that is not a rank-part key. */
export function rankPartKeyWorker(key: string): string | undefined {
  return rankPartKeyTail.exec(key)?.[1];
}
