import { describe, expect, it } from 'vitest';
import { readyOf, workerOf } from '../test/support.js';
import { PullNotStartedError, RouterOptionError } from './errors.js';
import { linkClassOf, SourceBook } from './sources.js';

describe('SourceBook', () => {
  it('knows a ready incarnation, warming until it announces its complete inventory', () => {
    const book = new SourceBook();
    const worker = workerOf('decode-1');
    expect(book.observe(readyOf(worker, 3))).toBe(true);
    expect(book.get('decode-1')).toMatchObject({ incarnation: 'decode-1-a', epoch: 3, warming: true, activePulls: 0, health: { healthy: true } });
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
    expect(book.get('decode-1')).toMatchObject({ incarnation: 'inc-2', epoch: 2, warming: true, activePulls: 0, health: { healthy: true } });
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

  it('refuses readiness, options and health of the wrong shape', () => {
    const book = new SourceBook();
    expect(() => book.observe(null as never)).toThrow(RouterOptionError);
    expect(() => book.observe(readyOf(workerOf('decode-1'), 1), null as never)).toThrow(/options/);
    expect(() => book.setHealth('decode-1', { healthy: 'yes' } as never)).toThrow(/health/);
    expect(book.setHealth('nobody', { healthy: true })).toBe(false);
  });
});
