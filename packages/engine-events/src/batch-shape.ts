// The shape check of a batch handed to the feed, which need not come from `EngineBatchDecoder`.
import type { EngineEventBatch } from './engine-event.js';
import { checkEngineHash } from './engine-hash-index.js';
import { EngineEventsInputError } from './errors.js';

const isWhole = (value: unknown): boolean => Number.isSafeInteger(value) && (value as number) >= 0;

function check(ok: boolean, argument: string, value: unknown, reason: string): void {
  if (!ok) throw new EngineEventsInputError(argument, value, reason);
}

function checkHashes(path: string, hashes: unknown): void {
  check(Array.isArray(hashes), path, hashes, 'block hashes are an array');
  const list = hashes as readonly unknown[];
  for (let i = 0; i < list.length; i++) checkEngineHash(`${path}[${i}]`, list[i]);
}

function checkOptional(path: string, value: unknown, ok: (value: unknown) => boolean, reason: string): void {
  check(value === null || ok(value), path, value, `${reason}, or null`);
}

function checkStored(path: string, event: Record<string, unknown>): void {
  checkHashes(`${path}.blockHashes`, event['blockHashes']);
  const parent = event['parentBlockHash'];
  if (parent !== null) checkEngineHash(`${path}.parentBlockHash`, parent);
  const tokens = event['tokenIds'];
  check(Array.isArray(tokens), `${path}.tokenIds`, tokens, 'token ids are an array');
  const ids = tokens as readonly unknown[];
  for (let i = 0; i < ids.length; i++) check(isWhole(ids[i]), `${path}.tokenIds[${i}]`, ids[i], 'a whole number');
  const blockSize = event['blockSize'];
  check(isWhole(blockSize) && (blockSize as number) >= 1, `${path}.blockSize`, blockSize, 'a whole number ≥ 1');
  checkOptional(`${path}.loraId`, event['loraId'], isWhole, 'a whole number');
  checkOptional(`${path}.loraName`, event['loraName'], (value) => typeof value === 'string', 'a string');
  const extraKeys = event['extraKeys'];
  checkOptional(`${path}.extraKeys`, extraKeys, Array.isArray, "an array of each block's extra keys");
  const perBlock = (extraKeys ?? []) as readonly unknown[];
  for (let i = 0; i < perBlock.length; i++)
    checkOptional(`${path}.extraKeys[${i}]`, perBlock[i], Array.isArray, 'an array');
}

/**
 * Refuses, naming the field (`batch.events[2].blockHashes[0]`), a batch that is not an
 * `EngineEventBatch` in what the feed reads of it.
 */
export function checkEventBatch(batch: EngineEventBatch): void {
  check(batch !== null && typeof batch === 'object', 'batch', batch, 'a batch is { ts, events, … }');
  check(Array.isArray(batch.events), 'batch.events', batch.events, 'events are an array');
  for (let i = 0; i < batch.events.length; i++) {
    const path = `batch.events[${i}]`;
    const event: unknown = batch.events[i];
    check(event !== null && typeof event === 'object', path, event, 'an event is an object');
    const fields = event as Record<string, unknown>;
    switch (fields['type']) {
      case 'AllBlocksCleared':
        continue;
      case 'BlockStored':
        checkStored(path, fields);
        break;
      case 'BlockRemoved':
        checkHashes(`${path}.blockHashes`, fields['blockHashes']);
        break;
      default:
        check(false, `${path}.type`, fields['type'], 'an event is BlockStored, BlockRemoved or AllBlocksCleared');
    }
    checkOptional(`${path}.medium`, fields['medium'], (value) => typeof value === 'string', 'a string');
    checkOptional(`${path}.groupIdx`, fields['groupIdx'], isWhole, 'a whole number');
  }
}
