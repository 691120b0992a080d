import { describe, expect, test } from 'vitest';
import { InventoryEventError } from './errors.js';
import {
  encodeInventoryBatch,
  type InventoryBatch,
  type InventoryEvent,
  parseInventoryBatch,
  safeParseInventoryBatch,
} from './events.js';

const batch: InventoryBatch = {
  workerId: 'decode-0',
  incarnation: '9f2c',
  epoch: 12,
  seq: 3,
  events: [
    { type: 'stored', tier: 'gpu', blocks: [0x0123456789abcdefn, 1n], expiresAt: 1_750_000_060_000 },
    { type: 'removed', tier: 'host', blocks: new BigUint64Array([0xffffffffffffffffn]) },
    { type: 'cleared', tier: 'host' },
  ],
};

describe('inventory batch wire form', () => {
  test('round-trips through JSON text and UTF-8 bytes, with hashes as 16 hex digits', () => {
    const text = encodeInventoryBatch(batch);
    expect(JSON.parse(text).events[0].blocks).toEqual(['0123456789abcdef', '0000000000000001']);
    for (const input of [text, new TextEncoder().encode(text)]) {
      const parsed = parseInventoryBatch(input);
      expect(parsed).toMatchObject({ workerId: 'decode-0', incarnation: '9f2c', epoch: 12, seq: 3 });
      expect(parsed.events.map((e) => (e.type === 'cleared' ? [] : [...e.blocks]))).toEqual([
        [0x0123456789abcdefn, 1n],
        [0xffffffffffffffffn],
        [],
      ]);
    }
  });

  test("writes each event's own fields only, so that a field an event carries beyond them does not get the batch refused", () => {
    const stored = { type: 'stored', tier: 'gpu', blocks: [1n], expiresAt: 1_750_000_060_000 } as const;
    // Events made from one another, as callers do: the removal keeps the expiry, the clear the blocks.
    const events: InventoryEvent[] = [
      { ...stored, note: 'prefill of request 7' } as InventoryEvent,
      { ...stored, type: 'removed' },
      { ...stored, type: 'cleared' },
    ];
    expect(parseInventoryBatch(encodeInventoryBatch({ ...batch, events })).events).toEqual([
      { type: 'stored', tier: 'gpu', blocks: BigUint64Array.of(1n), expiresAt: 1_750_000_060_000 },
      { type: 'removed', tier: 'gpu', blocks: BigUint64Array.of(1n) },
      { type: 'cleared', tier: 'gpu' },
    ]);
  });

  test('refuses malformed, tampered or wrong-version batches, naming the path and value', () => {
    const wire = JSON.parse(encodeInventoryBatch(batch));
    const refused = (value: unknown) => {
      const result = safeParseInventoryBatch(typeof value === 'string' ? value : JSON.stringify(value));
      expect(result.success).toBe(false);
      return result.success ? undefined : result.error;
    };
    expect(refused('{not json')).toMatchObject({ code: 'INVENTORY_INVALID_EVENT', path: '' });
    expect(refused({ ...wire, version: 1 })).toMatchObject({ path: 'version', value: 1 });
    expect(refused({ ...wire, epoch: undefined })).toMatchObject({ path: 'epoch' });
    expect(refused({ ...wire, epoch: 0 })).toMatchObject({ path: 'epoch', value: 0 });
    expect(
      refused({ ...wire, events: [{ type: 'stored', tier: 'gpu', blocks: ['XYZ'], expiresAt: 1 }] }),
    ).toMatchObject({
      path: 'events.0.blocks.0',
      value: 'XYZ',
    });
    expect(refused({ ...wire, events: [{ type: 'cleared', tier: 'disk' }] })).toMatchObject({ path: 'events.0.tier' });
    const inSeconds = Math.floor(Date.now() / 1000) + 3600;
    expect(
      refused({ ...wire, events: [{ type: 'stored', tier: 'gpu', blocks: [], expiresAt: inSeconds }] }),
    ).toMatchObject({
      path: 'events.0.expiresAt',
      value: inSeconds,
      message: expect.stringContaining('a timestamp in seconds'),
    });
    expect(refused({ ...wire, extra: true })).toBeInstanceOf(InventoryEventError);
    expect(() => parseInventoryBatch(new Uint8Array([0xff, 0xfe]))).toThrow(InventoryEventError);
  });
});

describe('the complete-inventory flag', () => {
  test('travels as version 3; a batch without it stays version 2, which every follower reads', () => {
    const complete = encodeInventoryBatch({ ...batch, complete: true });
    expect(JSON.parse(complete)).toMatchObject({ version: 3, complete: true });
    expect(parseInventoryBatch(complete).complete).toBe(true);
    const plain = encodeInventoryBatch({ ...batch, complete: false });
    expect(JSON.parse(plain)).not.toHaveProperty('complete');
    expect(JSON.parse(plain).version).toBe(2);
    expect(parseInventoryBatch(plain)).not.toHaveProperty('complete');
    expect(parseInventoryBatch(JSON.stringify({ ...JSON.parse(plain), version: 3 })).complete).toBeUndefined();
  });

  test('is refused on a version 2 batch, or with any value but true', () => {
    const wire = JSON.parse(encodeInventoryBatch(batch));
    expect(safeParseInventoryBatch(JSON.stringify({ ...wire, complete: true }))).toMatchObject({
      success: false,
      error: { path: 'complete', value: true, reason: 'needs inventory wire version 3' },
    });
    expect(safeParseInventoryBatch(JSON.stringify({ ...wire, version: 3, complete: false }))).toMatchObject({
      success: false,
      error: { path: 'complete', value: false },
    });
  });
});
