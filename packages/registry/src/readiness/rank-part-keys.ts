import type { RankId } from '@kvreuse/descriptors';
import { RankPartPublicationError } from '../errors.js';

/** Where kvreuse keeps its keys in a discovery store unless told otherwise. */
export const defaultKeyPrefix = 'kvreuse/';

const workerIdPattern = /^[A-Za-z0-9._:@-]{1,200}$/;

/** Worker ids become one key segment: letters, digits and `._:@-`, at most 200 characters. */
export function checkWorkerId(workerId: unknown): string {
  if (typeof workerId !== 'string' || !workerIdPattern.test(workerId)) {
    throw new RankPartPublicationError('workerId', workerId, 'must be 1–200 characters of letters, digits and ._:@-');
  }
  return workerId;
}

/** Every rank part of one worker lives under this prefix. */
export function workerPartsPrefix(workerId: string, keyPrefix = defaultKeyPrefix): string {
  return `${keyPrefix}workers/${checkWorkerId(workerId)}/ranks/`;
}

export function rankPartKey(workerId: string, rank: RankId, keyPrefix = defaultKeyPrefix): string {
  return `${workerPartsPrefix(workerId, keyPrefix)}pp${rank.ppRank}-tp${rank.tpRank}`;
}

/** The worker and rank a key names, or `undefined` for a key that is not a rank-part key. */
export function parseRankPartKey(key: string, keyPrefix = defaultKeyPrefix): ({ workerId: string } & RankId) | undefined {
  if (!key.startsWith(keyPrefix)) return undefined;
  const match = /^workers\/([^/]+)\/ranks\/pp(0|[1-9][0-9]{0,8})-tp(0|[1-9][0-9]{0,8})$/.exec(key.slice(keyPrefix.length));
  if (match === null) return undefined;
  const [, workerId = '', pp = '', tp = ''] = match;
  return { workerId, tpRank: Number(tp), ppRank: Number(pp) };
}
