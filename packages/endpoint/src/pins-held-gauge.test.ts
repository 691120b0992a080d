// The kvreuse_pins_held gauge follows every change of the pins held, not only the pin messages: a pin
// that lapses (its reader stopped renewing: dead, or hung) or that the draining source revokes drops
// out of it at once, on both sides. The lapse and the deadline are forced on the endpoints' manual clocks.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { hintFor, openWorker, start, allReady, type TestWorker } from '../test/support/endpoint-workers.js';
import { MemoryDiscoveryStore } from '@kvreuse/discovery';
import { nextTurn } from '../test/support/next-turn.js';
import { defaultSettings } from '../test/support/settings.js';
import { EndpointMetrics } from './metrics.js';
import type { HeldPin } from './pins.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function gauge(metrics: EndpointMetrics, side: 'serve' | 'pull'): Promise<number> {
  const line = (await metrics.text()).split('\n').find((text) => text.startsWith(`kvreuse_pins_held{side="${side}"}`));
  return Number(line?.split(' ').at(-1));
}

/** A serving TP 1 source and a TP 1 reader, each with metrics of its own, and a pull whose pin is held until `letGo`. */
async function heldPull() {
  const store = new MemoryDiscoveryStore();
  cleanups.push(() => store.close());
  const served = new EndpointMetrics();
  const pulled = new EndpointMetrics();
  const decode = await openWorker(
    store,
    { workerId: 'decode-0', role: 'decode', tpSize: 1, serve: true, metrics: served },
    cleanups,
  );
  const prefill = await openWorker(
    store,
    { workerId: 'prefill-0', role: 'prefill', tpSize: 1, metrics: pulled },
    cleanups,
  );
  for (const worker of [decode, prefill]) await start(worker);
  for (const worker of [decode, prefill]) await allReady(worker);
  const reader = prefill.ranks[0]!;
  const held: (readonly HeldPin[])[] = [];
  let letGo = (): void => undefined;
  const pulling = reader.endpoint.pull({
    hint: hintFor(decode, 4),
    destinationBlocks: Uint32Array.of(0, 1, 2, 3),
    beforeRelease: (pins) => {
      held.push(pins);
      return new Promise<void>((resolve) => (letGo = resolve));
    },
  });
  await vi.waitFor(() => expect(held).toHaveLength(1), { timeout: 20_000, interval: 5 });
  expect(await gauge(served, 'serve')).toBe(1);
  expect(await gauge(pulled, 'pull')).toBe(1);
  return {
    decode: decode as TestWorker,
    served,
    pulled,
    held: held[0]!,
    pulling,
    letGo: () => letGo(),
    released: () => reader.endpoint.pinsReleased(),
  };
}

describe('kvreuse_pins_held', () => {
  it('drops on the source when a pin lapses because its reader stopped renewing (a dead reader), without any pin message', async () => {
    const { decode, served, pulled, pulling, letGo, released } = await heldPull();
    // The reader's clock never moves, so it renews nothing: past the lease the source's pin lapses.
    decode.clock.advance(defaultSettings.discovery.leaseTtlMs);
    await nextTurn();
    expect(decode.ranks[0]!.endpoint.pinServer?.heldPins).toBe(0);
    expect(await gauge(served, 'serve')).toBe(0);
    letGo();
    await pulling;
    await released();
    expect(await gauge(pulled, 'pull')).toBe(0);
  });

  it('drops on both sides when the draining source revokes a pin at its deadline', async () => {
    const { decode, served, pulled, held, pulling, letGo, released } = await heldPull();
    const source = decode.ranks[0]!.endpoint;
    const closing = source.close({ deadlineMs: 1_000 });
    await vi.waitFor(() => expect(source.pinServer?.refusing).toBe(true), { timeout: 20_000, interval: 5 });
    decode.clock.advance(1_000);
    const loss = await held[0]!.lost;
    expect(loss.reason).toBe('shutting-down');
    expect(await gauge(served, 'serve')).toBe(0);
    expect(await gauge(pulled, 'pull')).toBe(0);
    letGo();
    await pulling;
    await released();
    expect((await closing).report.pins).toEqual([expect.objectContaining({ blocks: 4, ended: 'revoked' })]);
  });
});
