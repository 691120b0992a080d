// The shape check of a batch handed to the feed, which need not come from `EngineBatchDecoder`. It runs
// on every batch a subscriber applies: where a value is named (`batch.events[2].tokenIds[5]`) is put
// into words only for a value refused.
import { batchTsRule, type EngineEventBatch, isBatchTs } from './engine-event.js';
import { engineHashRule, isEngineHash } from './engine-hash-index.js';
import { EngineEventsInputError } from './errors.js';

const isWhole = (value: unknown): boolean => Number.isSafeInteger(value) && (value as number) >= 0;
const isString = (value: unknown): boolean => typeof value === 'string';

/** Refuses `value`, found at `field` (`''` for the event itself, or `.name`), element `element` if given, of event `event`. */
function refuse(event: number, field: string, element: number | undefined, value: unknown, reason: string): never {
  const at = element === undefined ? '' : `[${element}]`;
  throw new EngineEventsInputError(`batch.events[${event}]${field}${at}`, value, reason);
}

function checkField(event: number, field: string, value: unknown, ok: boolean, reason: string): void {
  if (!ok) refuse(event, field, undefined, value, reason);
}

function checkOptional(event: number, field: string, value: unknown, ok: (value: unknown) => boolean, reason: string) {
  checkField(event, field, value, value === null || ok(value), reason);
}

/** An array (`notArray` refuses anything else), each element of which `ok` accepts (`reason` refuses one it does not). */
function checkArray(
  event: number,
  field: string,
  value: unknown,
  notArray: string,
  ok: (element: unknown) => boolean,
  reason: string,
): void {
  checkField(event, field, value, Array.isArray(value), notArray);
  const list = value as readonly unknown[];
  for (let i = 0; i < list.length; i++) if (!ok(list[i])) refuse(event, field, i, list[i], reason);
}

function checkStored(event: number, fields: Record<string, unknown>): void {
  checkArray(event, '.blockHashes', fields['blockHashes'], 'block hashes are an array', isEngineHash, engineHashRule);
  const parent = fields['parentBlockHash'];
  checkField(event, '.parentBlockHash', parent, parent === null || isEngineHash(parent), engineHashRule);
  checkArray(event, '.tokenIds', fields['tokenIds'], 'token ids are an array', isWhole, 'a whole number');
  const blockSize = fields['blockSize'];
  checkField(event, '.blockSize', blockSize, isWhole(blockSize) && (blockSize as number) >= 1, 'a whole number ≥ 1');
  checkOptional(event, '.loraId', fields['loraId'], isWhole, 'a whole number, or null');
  checkOptional(event, '.loraName', fields['loraName'], isString, 'a string, or null');
  const extraKeys = fields['extraKeys'];
  checkOptional(event, '.extraKeys', extraKeys, Array.isArray, "an array of each block's extra keys, or null");
  const perBlock = (extraKeys ?? []) as readonly unknown[];
  for (let i = 0; i < perBlock.length; i++)
    if (perBlock[i] !== null && !Array.isArray(perBlock[i]))
      refuse(event, '.extraKeys', i, perBlock[i], 'an array, or null');
}

/**
 * Refuses, naming the field (`batch.ts`, `batch.events[2].blockHashes[0]`), a batch that is not an
 * `EngineEventBatch` in what the feed and the subscriber read of it.
 */
export function checkEventBatch(batch: EngineEventBatch): void {
  if (batch === null || typeof batch !== 'object')
    throw new EngineEventsInputError('batch', batch, 'a batch is { ts, events, … }');
  if (!isBatchTs(batch.ts)) throw new EngineEventsInputError('batch.ts', batch.ts, batchTsRule);
  if (!Array.isArray(batch.events))
    throw new EngineEventsInputError('batch.events', batch.events, 'events are an array');
  for (let i = 0; i < batch.events.length; i++) {
    const event: unknown = batch.events[i];
    checkField(i, '', event, event !== null && typeof event === 'object', 'an event is an object');
    const fields = event as Record<string, unknown>;
    switch (fields['type']) {
      case 'AllBlocksCleared':
        continue;
      case 'BlockStored':
        checkStored(i, fields);
        break;
      case 'BlockRemoved':
        checkArray(i, '.blockHashes', fields['blockHashes'], 'block hashes are an array', isEngineHash, engineHashRule);
        break;
      default:
        refuse(i, '.type', undefined, fields['type'], 'an event is BlockStored, BlockRemoved or AllBlocksCleared');
    }
    checkOptional(i, '.medium', fields['medium'], isString, 'a string, or null');
    checkOptional(i, '.groupIdx', fields['groupIdx'], isWhole, 'a whole number, or null');
  }
}
