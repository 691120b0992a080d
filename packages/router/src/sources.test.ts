import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { claimIncarnationEpoch, SqliteDiscoveryStore } from '@kvreuse/discovery';
import { followInventory, hashBlockChain, InventoryPublisher, RetainedInventory } from '@kvreuse/inventory';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { readyOf, workerOf } from '../test/support.js';
import { PullNotStartedError, RouterOptionError } from './errors.js';
import { linkClassBetween, linkClassOf, publishedHost, SourceBook } from './sources.js';

describe('SourceBook', () => {
  it('knows a ready incarnation, warming until it announces its complete inventory', () => {
    const book = new SourceBook();
    const worker = workerOf('decode-1');
    expect(book.observe(readyOf(worker, 3))).toBe(true);
    expect(book.get('decode-1')).toMatchObject({
      incarnation: 'decode-1-a',
      epoch: 3,
      warming: true,
      activePulls: 0,
      health: { healthy: true },
    });
    expect(book.inventoryComplete('decode-1', 3)).toBe(true);
    expect(book.get('decode-1')?.warming).toBe(false);
  });

  it('takes a complete-inventory announcement made before readiness once the incarnation is ready, and no older one', () => {
    const book = new SourceBook();
    book.inventoryComplete('decode-1', 2);
    book.observe(readyOf(workerOf('decode-1'), 2));
    expect(book.get('decode-1')?.warming).toBe(false);
    expect(book.inventoryComplete('decode-1', 1)).toBe(false);
  });

  it('replaces an incarnation by a newer one (warming, no pulls, healthy) and ignores an older one', () => {
    const book = new SourceBook();
    book.observe(readyOf(workerOf('decode-1', { incarnation: 'inc-1' }), 1));
    book.inventoryComplete('decode-1', 1);
    book.pullStarted('decode-1', 1);
    book.setHealth('decode-1', { healthy: false, reason: 'fenced' });
    book.observe(readyOf(workerOf('decode-1', { incarnation: 'inc-2' }), 2));
    expect(book.get('decode-1')).toMatchObject({
      incarnation: 'inc-2',
      epoch: 2,
      warming: true,
      activePulls: 0,
      health: { healthy: true },
    });
    expect(book.observe(readyOf(workerOf('decode-1', { incarnation: 'inc-1' }), 1))).toBe(false);
    expect(book.get('decode-1')?.incarnation).toBe('inc-2');
    // The old incarnation's pulls end into nothing.
    expect(book.pullEnded('decode-1', 1)).toBe(false);
  });

  it('forgets a worker that is no longer ready, and warms it again when it comes back', () => {
    const book = new SourceBook();
    const worker = workerOf('decode-1');
    book.observe(readyOf(worker, 1));
    book.inventoryComplete('decode-1', 1);
    book.observe({ ready: false, workerId: 'decode-1', incarnation: worker.incarnation, reasons: [] });
    expect(book.get('decode-1')).toBeUndefined();
    expect(book.ready()).toEqual([]);
    book.observe(readyOf(worker, 1));
    expect(book.get('decode-1')?.warming).toBe(true);
  });

  it('remembers only the last incarnations seen ready, however often a worker restarts', () => {
    const book = new SourceBook();
    const notReady = (incarnation: string) => ({
      ready: false as const,
      workerId: 'decode-1',
      incarnation,
      reasons: [],
    });
    for (let epoch = 1; epoch <= 100; epoch++) {
      book.observe(readyOf(workerOf('decode-1', { incarnation: `inc-${epoch}` }), epoch));
    }
    // A late report about one of the three incarnations before the ready one changes nothing.
    for (const late of ['inc-99', 'inc-98', 'inc-97']) {
      book.observe(notReady(late));
      expect(book.get('decode-1')).toMatchObject({ incarnation: 'inc-100', epoch: 100 });
    }
    // One about an older incarnation is no longer told from a newer one coming up: the ready one stops serving.
    book.observe(notReady('inc-96'));
    expect(book.get('decode-1')).toBeUndefined();
  });

  it('counts pulls per incarnation and refuses an end without a start', () => {
    const book = new SourceBook();
    book.observe(readyOf(workerOf('decode-1'), 1));
    expect(book.pullStarted('decode-1', 1)).toBe(true);
    expect(book.pullStarted('decode-1', 2)).toBe(false);
    expect(book.get('decode-1')?.activePulls).toBe(1);
    expect(book.pullEnded('decode-1', 1)).toBe(true);
    expect(() => book.pullEnded('decode-1', 1)).toThrow(PullNotStartedError);
    expect(book.get('decode-1')?.activePulls).toBe(0);
  });

  it('refuses a pull epoch that is no whole number ≥ 1, counting nothing', () => {
    const book = new SourceBook();
    book.observe(readyOf(workerOf('decode-1'), 1));
    for (const epoch of [Number.NaN, 1.5, -1, 0]) {
      expect(() => book.pullStarted('decode-1', epoch)).toThrow(RouterOptionError);
      expect(() => book.pullEnded('decode-1', epoch)).toThrow(/router option epoch/);
    }
    expect(() => book.pullStarted(5 as never, 1)).toThrow(/router option workerId = 5/);
    expect(book.get('decode-1')?.activePulls).toBe(0);
  });

  it('remembers compatibility per destination incarnation, and says why not', () => {
    const book = new SourceBook();
    book.observe(readyOf(workerOf('decode-1', { tpSize: 2 }), 1));
    const source = book.get('decode-1')!;
    expect(book.incompatibility(source, workerOf('prefill-0', { role: 'prefill' }))).toBeUndefined();
    const small = workerOf('prefill-1', { role: 'prefill', geometry: { ...source.worker.geometry, blockTokens: 16 } });
    expect(book.incompatibility(source, small)).toBe('source blockTokens is 64, destination blockTokens is 16');
  });

  it('tells same-host from network', () => {
    const book = new SourceBook();
    book.observe(readyOf(workerOf('decode-1'), 1), { host: 'node-a' });
    const source = book.get('decode-1')!;
    expect(linkClassOf(source, 'node-a')).toBe('same-host');
    expect(linkClassOf(source, 'node-b')).toBe('network');
    expect(linkClassOf(source, undefined)).toBe('network');
  });

  it('derives the link class from the hosts the rank parts publish, before the hosts the caller gives', () => {
    const book = new SourceBook();
    const sourceOn = (workerId: string, host: string | readonly string[] | undefined, given?: string) => {
      book.observe(
        readyOf(workerOf(workerId, { tpSize: 2, ...(host === undefined ? {} : { host }) }), 1),
        given === undefined ? {} : { host: given },
      );
      return book.get(workerId)!;
    };
    const destinationOn = (host: string | undefined) =>
      workerOf('prefill-0', { role: 'prefill', ...(host === undefined ? {} : { host }) });
    const onA = sourceOn('decode-a', 'node-a', 'caller-says-b');
    expect(publishedHost(onA.worker)).toBe('node-a');
    expect(linkClassBetween(onA, destinationOn('node-a'), 'caller-says-b')).toBe('same-host');
    expect(linkClassBetween(onA, destinationOn('node-b'), 'caller-says-b')).toBe('network');
    // A worker whose ranks span machines is never on the destination's host.
    const spanning = sourceOn('decode-s', ['node-a', 'node-b']);
    expect(publishedHost(spanning.worker)).toBeNull();
    expect(linkClassBetween(spanning, destinationOn('node-a'), undefined)).toBe('network');
    // Parts that name no host (versions 1 and 2): the hosts the caller gave decide.
    const unnamed = sourceOn('decode-u', undefined, 'node-c');
    expect(publishedHost(unnamed.worker)).toBeUndefined();
    expect(linkClassBetween(unnamed, destinationOn('node-a'), 'node-c')).toBe('same-host');
    expect(linkClassBetween(onA, destinationOn(undefined), 'caller-says-b')).toBe('same-host');
    expect(linkClassBetween(onA, destinationOn(undefined), 'node-a')).toBe('network');
  });

  it('refuses readiness, options and health of the wrong shape', () => {
    const book = new SourceBook();
    expect(() => book.observe(null as never)).toThrow(RouterOptionError);
    expect(() => book.observe(readyOf(workerOf('decode-1'), 1), null as never)).toThrow(/options/);
    expect(() => book.setHealth('decode-1', { healthy: 'yes' } as never)).toThrow(/health/);
    // Unhealthy says why: the reason is what every rejection of the source shows.
    expect(() => book.setHealth('decode-1', { healthy: false } as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ROUTER_OPTION', option: 'health' }),
    );
    expect(() => book.setHealth('decode-1', { healthy: false, reason: '' })).toThrow(/health/);
    expect(book.setHealth('nobody', { healthy: true })).toBe(false);
  });

  it('refuses a complete-inventory announcement without a worker id or a whole epoch ≥ 1, keeping the one before', () => {
    const book = new SourceBook();
    book.inventoryComplete('decode-1', 3);
    for (const [option, workerId, epoch] of [
      ['epoch', 'decode-1', Number.NaN],
      ['epoch', 'decode-1', 3.5],
      ['epoch', 'decode-1', '3'],
      ['epoch', 'decode-1', Number.POSITIVE_INFINITY],
      ['workerId', 5, 3],
      ['workerId', '', 3],
    ] as const) {
      expect(() => book.inventoryComplete(workerId as never, epoch as never), option).toThrow(
        expect.objectContaining({ code: 'INVALID_ROUTER_OPTION', option }),
      );
    }
    book.observe(readyOf(workerOf('decode-1'), 3));
    expect(book.get('decode-1')?.warming).toBe(false);
  });

  it('keeps the health it was given, whatever the caller does with its object afterwards', () => {
    const book = new SourceBook();
    book.observe(readyOf(workerOf('decode-1'), 1));
    const health = { healthy: false, reason: 'fenced' };
    book.setHealth('decode-1', health);
    health.reason = '';
    (health as { healthy: boolean }).healthy = true;
    expect(book.get('decode-1')?.health).toEqual({ healthy: false, reason: 'fenced' });
  });

  it('refuses a host or a declared block hash of the wrong shape, taking nothing in', () => {
    const book = new SourceBook();
    const ready = readyOf(workerOf('decode-1'), 1);
    for (const [option, options] of [
      ['options.host', { host: 5 }],
      ['options.blockHash', { blockHash: 'kvreuse.block-hash.v3' }],
      ['options.blockHash', { blockHash: { function: 'kvreuse.block-hash.v3' } }],
      ['options.blockHash', { blockHash: null }],
    ] as const) {
      expect(() => book.observe(ready, options as never), option).toThrow(
        expect.objectContaining({ code: 'INVALID_ROUTER_OPTION', option }),
      );
    }
    expect(book.get('decode-1')).toBeUndefined();
  });

  it('refuses a ready readiness without its incarnation, a whole epoch ≥ 1 or its worker, and keeps the fence', () => {
    const book = new SourceBook();
    const current = workerOf('decode-1', { incarnation: 'inc-5' });
    book.observe(readyOf(current, 5));
    const older = readyOf(workerOf('decode-1', { incarnation: 'inc-1' }), 1);
    for (const [field, readiness] of [
      ['readiness.epoch', { ...readyOf(current, 5), epoch: Number.NaN }],
      ['readiness.epoch', { ...readyOf(current, 5), epoch: 0 }],
      ['readiness.epoch', { ...readyOf(current, 5), epoch: '6' }],
      ['readiness.incarnation', { ...readyOf(current, 6), incarnation: undefined }],
      ['readiness.worker', { ...readyOf(current, 6), worker: undefined }],
    ] as const) {
      expect(() => book.observe(readiness as never), field).toThrow(
        expect.objectContaining({ code: 'INVALID_ROUTER_OPTION', option: field }),
      );
    }
    // Nothing was taken in: an older incarnation is still fenced off, and the ready one still serves.
    expect(book.observe(older)).toBe(false);
    expect(book.get('decode-1')).toMatchObject({ incarnation: 'inc-5', epoch: 5, worker: current });
  });
});

describe('SourceBook following the inventory over sqlite discovery', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvreuse-router-warming-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The completions a follower reports, awaited one at a time. */
  function completions() {
    const seen: { workerId: string; incarnation: string; epoch: number }[] = [];
    const waiting: ((value: (typeof seen)[number]) => void)[] = [];
    return {
      onComplete: (worker: (typeof seen)[number]) => {
        const resolve = waiting.shift();
        if (resolve === undefined) seen.push(worker);
        else resolve(worker);
      },
      next: () =>
        seen.length > 0
          ? Promise.resolve(seen.shift()!)
          : new Promise<(typeof seen)[number]>((resolve) => waiting.push(resolve)),
    };
  }

  it('warms each incarnation until its own batches say its inventory is complete, across a restart', async () => {
    const path = join(dir, 'discovery.db');
    // The decode worker and the router are separate clients of one discovery database.
    const workerSide = new SqliteDiscoveryStore(path, { pollIntervalMs: 5 });
    const routerSide = new SqliteDiscoveryStore(path, { pollIntervalMs: 5 });
    const inventory = new RetainedInventory();
    const completed = completions();
    const follower = await followInventory(routerSide, inventory, { onComplete: completed.onComplete });
    const book = new SourceBook({ inventory });
    const chain = hashBlockChain(
      Array.from({ length: 64 * 4 }, (_, i) => i),
      { salt: 7n, blockTokens: 64 },
    );
    const expiresAt = Date.now() + 600_000;
    const lease = await workerSide.grantLease(600_000);

    const start = async (incarnation: string) => {
      const claim = await claimIncarnationEpoch(workerSide, { workerId: 'decode-1', incarnation });
      book.observe(readyOf(workerOf('decode-1', { incarnation }), claim.epoch));
      const publisher = new InventoryPublisher(workerSide, { ...claim, lease: lease.id });
      await publisher.publish([{ type: 'stored', tier: 'host', blocks: chain, expiresAt }]);
      await vi.waitFor(() =>
        expect(inventory.longestRetainedPrefix(chain)).toEqual([expect.objectContaining({ incarnation, blocks: 4 })]),
      );
      expect(book.get('decode-1')).toMatchObject({ incarnation, epoch: claim.epoch, warming: true });
      await publisher.publish([], { complete: true });
      expect(await completed.next()).toEqual({ workerId: 'decode-1', incarnation, epoch: claim.epoch });
      expect(book.get('decode-1')).toMatchObject({ incarnation, warming: false });
      // Later batches of the incarnation still say so.
      await publisher.publish([{ type: 'removed', tier: 'host', blocks: chain.subarray(3) }]);
      expect(publisher.complete).toBe(true);
      return claim.epoch;
    };
    const first = await start('decode-1-a');
    const second = await start('decode-1-b');
    expect(second).toBeGreaterThan(first);

    // A router that starts later learns it from the latest batch it finds.
    const lateSide = new SqliteDiscoveryStore(path, { pollIntervalMs: 5 });
    const lateInventory = new RetainedInventory();
    const lateCompleted = completions();
    const late = await followInventory(lateSide, lateInventory, { onComplete: lateCompleted.onComplete });
    expect(await lateCompleted.next()).toEqual({ workerId: 'decode-1', incarnation: 'decode-1-b', epoch: second });
    const lateBook = new SourceBook({ inventory: lateInventory });
    lateBook.observe(readyOf(workerOf('decode-1', { incarnation: 'decode-1-b' }), second));
    expect(lateBook.get('decode-1')?.warming).toBe(false);

    await Promise.all([follower.close(), late.close()]);
    await Promise.all([workerSide.close(), routerSide.close(), lateSide.close()]);
  });

  it('refuses an inventory option that is not a RetainedInventory', () => {
    expect(() => new SourceBook({ inventory: {} as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_ROUTER_OPTION', option: 'options.inventory' }),
    );
  });
});
