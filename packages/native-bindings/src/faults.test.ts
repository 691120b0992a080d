import { describe, expect, it } from 'vitest';
import { testedBackends } from '../test/support/backends.js';
import { findPatternMismatch, piecewiseDescriptors } from '../test/support/content.js';
import { type AgentPair, allZero, liveCounters, openPair, readRequest } from '../test/support/pair.js';
import { InvalidArgumentError, NativeTransportError } from './errors.js';

const PIECE = 4096;

function readAll(pair: AgentPair, pieces: number) {
  return pair.reader.post(readRequest(pair, piecewiseDescriptors(pieces, PIECE)));
}

describe.each(testedBackends)('fault injection and in-flight guards on %s', (backend) => {
  it('keeps memory, operation and agent BUSY while a read is held in flight, and frees them after', async () => {
    const pair = await openPair(backend, 8 * PIECE, 61);
    pair.reader.faults.delayCompletions('forever');
    const operation = readAll(pair, 8);
    expect(operation.status().state).toBe('in-progress');
    await expect(pair.readerRegion.deregister()).rejects.toMatchObject({ code: 'BUSY', call: 'kvt_mem_deregister' });
    expect(pair.readerRegion.isOpen).toBe(true);
    expect(() => operation.release()).toThrow(expect.objectContaining({ code: 'BUSY' }));
    await expect(pair.reader.close()).rejects.toMatchObject({ code: 'BUSY', call: 'kvt_agent_shutdown' });
    expect(pair.reader.counters()).toMatchObject({ inflightOperations: 1, liveOperations: 1 });

    pair.reader.faults.clear();
    await expect(operation.done).resolves.toEqual({ bytesDone: 8 * PIECE });
    expect(findPatternMismatch(pair.readerBank.view(), 61)).toBe(-1);
    operation.release();
    await pair.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('cancels a held operation: it ends with CANCELED and can then be released', async () => {
    const pair = await openPair(backend, 4 * PIECE, 62);
    pair.reader.faults.delayCompletions('forever');
    const operation = readAll(pair, 4);
    expect(operation.cancel()).toBe('requested');
    await expect(operation.done).rejects.toMatchObject({ code: 'CANCELED' });
    expect(operation.status()).toMatchObject({ state: 'failed', code: 'CANCELED' });
    expect(operation.cancel()).toBe('already-terminal');
    operation.release();
    expect(pair.reader.counters().errors.CANCELED).toBe(1);
    await pair.close();
  });

  it('fails the nth registration, post or completion with the chosen code', async () => {
    const pair = await openPair(backend, 4 * PIECE, 63);
    const spare = await pair.reader.allocate(PIECE);
    pair.reader.faults.failNth('register', 1, 'BACKEND');
    expect(() => pair.reader.register(spare)).toThrow(
      expect.objectContaining({ code: 'BACKEND', call: 'kvt_mem_register' }),
    );
    expect(pair.reader.counters().liveRegistrations).toBe(1);
    await spare.free();

    pair.reader.faults.failNth('post', 2, 'NOT_ALLOWED');
    const first = readAll(pair, 1);
    expect(() => readAll(pair, 1)).toThrow(expect.objectContaining({ code: 'NOT_ALLOWED', call: 'kvt_xfer_post' }));
    await first.done;
    first.release();

    pair.reader.faults.failNth('completion', 1, 'REMOTE_DISCONNECT');
    const failing = readAll(pair, 4);
    const error = await failing.done.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(NativeTransportError);
    expect(error).toMatchObject({ code: 'REMOTE_DISCONNECT', call: 'kvt_agent_poll' });
    failing.release();

    pair.reader.faults.delayCompletions(5);
    const delayed = readAll(pair, 4);
    await expect(delayed.done).resolves.toEqual({ bytesDone: 4 * PIECE });
    delayed.release();
    pair.reader.faults.clear();
    await pair.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('refuses bad fault arguments before calling the library', async () => {
    const pair = await openPair(backend, PIECE, 64);
    expect(() => pair.reader.faults.failNth('free' as 'post', 1, 'BUSY')).toThrow(InvalidArgumentError);
    expect(() => pair.reader.faults.failNth('post', 0, 'BUSY')).toThrow(InvalidArgumentError);
    expect(() => pair.reader.faults.failNth('post', 1, 'OOPS' as 'BUSY')).toThrow(InvalidArgumentError);
    expect(() => pair.reader.faults.delayCompletions(-1)).toThrow(InvalidArgumentError);
    await pair.close();
  });

  it('settles an operation released after it ended but before the wake-up was read', async () => {
    const pair = await openPair(backend, PIECE, 65);
    const operation = readAll(pair, 1);
    // Wait without yielding to the event loop, so the wake-up is not read before release().
    const pause = new Int32Array(new SharedArrayBuffer(4));
    for (let waited = 0; operation.status().state === 'in-progress' && waited < 10_000; waited++)
      Atomics.wait(pause, 0, 0, 1);
    expect(operation.isSettled).toBe(false);
    operation.release();
    await expect(operation.done).resolves.toEqual({ bytesDone: PIECE });
    await pair.close();
  });
});
