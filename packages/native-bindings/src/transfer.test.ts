import { describe, expect, it } from 'vitest';
import { testedBackends } from '../test/support/backends.js';
import { fillPattern, findPatternMismatch, isFilledWith, piecewiseDescriptors } from '../test/support/content.js';
import { allZero, liveCounters, openPair, readRequest } from '../test/support/pair.js';
import { ForeignHandleError, HandleClosedError, InvalidArgumentError, NativeTransportError } from './errors.js';

const PIECE = 4096;

describe.each(testedBackends)('transfers on %s', (backend) => {
  it('READs a batch and WRITEs one back, moving exactly the described bytes', async () => {
    const pair = await openPair(backend, 64 * PIECE, 11);
    const read = pair.reader.post(readRequest(pair, piecewiseDescriptors(64, PIECE)));
    await expect(read.done).resolves.toEqual({ bytesDone: 64 * PIECE });
    expect(read.status()).toEqual({ state: 'done', bytesDone: 64 * PIECE, bytesTotal: 64 * PIECE });
    expect(findPatternMismatch(pair.readerBank.view(), 11)).toBe(-1);
    read.release();
    expect(() => read.status()).toThrow(HandleClosedError);

    // WRITE pieces 2..3 of a new pattern from the reader into the source, at another offset.
    fillPattern(pair.readerBank.view(), 12);
    const write = pair.reader.post({
      ...readRequest(pair, {
        sourceBank: Uint32Array.of(0),
        sourceOffset: BigUint64Array.of(BigInt(2 * PIECE)),
        destinationBank: Uint32Array.of(0),
        destinationOffset: BigUint64Array.of(BigInt(40 * PIECE)),
        length: BigUint64Array.of(BigInt(2 * PIECE)),
      }),
      direction: 'write',
    });
    await write.done;
    write.release();
    const source = pair.sourceBank.view();
    expect(findPatternMismatch(source.subarray(40 * PIECE, 42 * PIECE), 12, 2 * PIECE)).toBe(-1);
    expect(findPatternMismatch(source.subarray(0, 40 * PIECE), 11)).toBe(-1);
    expect(findPatternMismatch(source.subarray(42 * PIECE), 11, 42 * PIECE)).toBe(-1);
    // kvreuse banks in one process are copied directly (UCX: through the mapping): no get/put request. On UCX the
    // small READ was copied by post() itself; the WRITE went to the progress thread.
    expect(pair.reader.counters()).toMatchObject({
      bytesMoved: 66 * PIECE,
      requestsIssued: 0,
      inflightRequests: 0,
      inlineOperations: backend === 'ucx' ? 1 : 0,
    });
    await pair.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('refuses a batch with one descriptor past the end of either region, moving nothing', async () => {
    const pair = await openPair(backend, 16 * PIECE, 21);
    const request = (offsetField: 'sourceOffset' | 'destinationOffset') => {
      const descriptors = piecewiseDescriptors(16, PIECE);
      descriptors[offsetField][7] = BigInt(16 * PIECE - PIECE / 2); // half of it past the end
      return readRequest(pair, descriptors);
    };
    for (const field of ['sourceOffset', 'destinationOffset'] as const) {
      const error = (() => {
        try {
          pair.reader.post(request(field));
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(NativeTransportError);
      expect(error).toMatchObject({
        code: 'INVALID_PARAM',
        call: 'kvt_xfer_post',
        detail: expect.stringContaining('7'),
      });
    }
    expect(isFilledWith(pair.readerBank.view(), 0)).toBe(true);
    expect(pair.reader.counters()).toMatchObject({ bytesMoved: 0, liveOperations: 0 });
    await pair.close();
  });

  it('refuses malformed requests before calling the library', async () => {
    const pair = await openPair(backend, 4 * PIECE, 31);
    const good = readRequest(pair, piecewiseDescriptors(4, PIECE));
    expect(() => pair.reader.post({ ...good, descriptors: piecewiseDescriptors(0, PIECE) })).toThrow(
      InvalidArgumentError,
    );
    expect(() =>
      pair.reader.post({ ...good, descriptors: { ...good.descriptors, length: new BigUint64Array(3) } }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'descriptors.sourceBank.length' }));
    expect(() =>
      pair.reader.post({
        ...good,
        descriptors: { ...good.descriptors, sourceOffset: [0n] as unknown as BigUint64Array },
      }),
    ).toThrow(expect.objectContaining({ argument: 'descriptors.sourceOffset' }));
    expect(() => pair.reader.post({ ...good, remoteRegions: [-1] })).toThrow(InvalidArgumentError);
    expect(() => pair.reader.post({ ...good, direction: 'copy' as 'read' })).toThrow(InvalidArgumentError);
    expect(() => pair.reader.post({ ...good, localRegions: [pair.sourceRegion] })).toThrow(ForeignHandleError);
    expect(() => pair.reader.post({ ...good, localRegions: [undefined as never] })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'localRegions[0]' }),
    );
    expect(() => pair.reader.post({ ...good, peer: pair.readerPeer })).toThrow(ForeignHandleError);
    await pair.close();
  });

  it('refuses a request, peer or table of the wrong shape with InvalidArgumentError naming it, not a TypeError', async () => {
    const pair = await openPair(backend, PIECE, 33);
    const good = readRequest(pair, piecewiseDescriptors(1, PIECE));
    const refused = (argument: string) => expect.objectContaining({ code: 'INVALID_ARGUMENT', argument });
    expect(() => pair.reader.post(undefined as never)).toThrow(refused('request'));
    expect(() => pair.reader.post({ ...good, peer: undefined as never })).toThrow(refused('peer'));
    expect(() => pair.reader.post({ ...good, peer: { id: 0 } as never })).toThrow(refused('peer'));
    expect(() => pair.reader.post({ ...good, descriptors: undefined as never })).toThrow(refused('descriptors'));
    expect(() => pair.reader.post({ ...good, localRegions: undefined as never })).toThrow(refused('localRegions'));
    expect(() => pair.reader.post({ ...good, remoteRegions: undefined as never })).toThrow(refused('remoteRegions'));
    expect(() => pair.reader.sendNotification(undefined as never, 'x')).toThrow(refused('peer'));
    expect(() => pair.reader.sendNotification({ id: 0 } as never, 'x')).toThrow(refused('peer'));
    expect(pair.reader.counters()).toMatchObject({ operationsPosted: 0, notificationsSent: 0 });
    await pair.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('refuses an empty notification, or one that is not bytes or a string, posting nothing', async () => {
    const pair = await openPair(backend, PIECE, 32);
    const good = readRequest(pair, piecewiseDescriptors(1, PIECE));
    for (const notification of ['', new Uint8Array(0), 42, { text: 'done' }]) {
      expect(() => pair.reader.post({ ...good, notification: notification as Uint8Array })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'notification' }),
      );
    }
    expect(pair.reader.counters()).toMatchObject({ operationsPosted: 0, liveOperations: 0 });
    await pair.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('completes a thousand concurrent operations from one process, every one verified', async () => {
    const count = 1000;
    const pair = await openPair(backend, count * PIECE, 41);
    const operations = Array.from({ length: count }, (_, i) =>
      pair.reader.post(readRequest(pair, piecewiseDescriptors(1, PIECE, i * PIECE))),
    );
    const results = await Promise.all(operations.map((operation) => operation.done));
    expect(results.every((result) => result.bytesDone === PIECE)).toBe(true);
    expect(findPatternMismatch(pair.readerBank.view(), 41)).toBe(-1);
    for (const operation of operations) operation.release();
    expect(pair.reader.counters()).toMatchObject({ liveOperations: 0, inflightOperations: 0, operationsPosted: count });
    await pair.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('sends the notification of a post once its bytes have moved', async () => {
    const pair = await openPair(backend, 4 * PIECE, 51);
    const operation = pair.reader.post({
      ...readRequest(pair, piecewiseDescriptors(4, PIECE)),
      notification: 'read 4 pieces',
    });
    const notification = await pair.source.nextNotification();
    expect(notification.sender).toBe(pair.reader.name);
    expect(notification.data.toString()).toBe('read 4 pieces');
    await operation.done;
    operation.release();
    await pair.close();
  });
});
