// Focused cases of the ledger the loopback backend cannot produce on demand (a cancel the native
// layer does not confirm, a success after the timeout), over the fake native layer.
import { describe, expect, it } from 'vitest';
import { FakeNative } from '../test/support/fake-native.js';
import { fakeRequest, flush, openFakeWorld, PEER, TIMEOUTS } from '../test/support/fake-world.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { InvalidDrainOptionError, OperationRefusedError } from './errors.js';
import { OperationLedger } from './ledger.js';
import { PeerBook } from './peer-book.js';

describe('OperationLedger', () => {
  it('quarantines an operation whose cancel is not confirmed by the abandon deadline, retaining its banks', async () => {
    const world = await openFakeWorld(1, 2);
    const [bank] = world.banks;
    const quarantined: string[] = [];
    world.ledger.on('quarantined', (operation) => quarantined.push(operation.id));
    const operation = world.ledger.post(fakeRequest(world, [bank!]), { ticket: world.book.ticket(PEER), banks: [bank!] });
    world.clock.advance(TIMEOUTS.operationTimeoutMs);
    expect(operation.phase).toBe('timed-out');
    expect(world.native.operations[0]!.cancelRequested).toBe(true);
    world.clock.advance(TIMEOUTS.abandonTimeoutMs - TIMEOUTS.operationTimeoutMs);
    expect(operation.phase).toBe('quarantined');
    expect(quarantined).toEqual([operation.id]);
    expect(bank!.state).toBe('retained');
    expect(bank!.retainedReason).toBe(`quarantined: operation ${operation.id} not terminal 250 ms after it was posted (transport.abandonTimeoutMs)`);
    expect(world.ledger.quarantined()).toEqual([
      { id: operation.id, peer: PEER, banks: [expect.objectContaining({ index: 0 })], reason: expect.stringContaining('abandonTimeoutMs') },
    ]);
    // A retained bank takes no new operation.
    world.book.track(PEER, 'incarnation-1', world.peer);
    expect(() => world.ledger.post(fakeRequest(world, [bank!]), { ticket: world.book.ticket(PEER), banks: [bank!] })).toThrow(OperationRefusedError);
    expect(bank!.references).toBe(1);
  });

  it('keeps a timed-out request failed when the native layer later reports success, and says it was late', async () => {
    const world = await openFakeWorld(1, 1);
    const [bank] = world.banks;
    const quiesced: boolean[] = [];
    world.ledger.on('quiesced', (_operation, quiescence) => quiesced.push(quiescence.late));
    const operation = world.ledger.post(fakeRequest(world, [bank!]), { ticket: world.book.ticket(PEER), banks: [bank!] });
    world.clock.advance(TIMEOUTS.abandonTimeoutMs);
    expect(operation.phase).toBe('quarantined');
    world.native.operations[0]!.complete();
    expect(await operation.quiescence).toEqual({ terminal: 'done', bytesDone: 4096, late: true, quarantined: true });
    expect(await operation.outcome).toMatchObject({ ok: false, error: { code: 'OPERATION_TIMED_OUT' } });
    expect(quiesced).toEqual([true]);
    expect(bank!.references).toBe(0);
    expect(world.native.operations[0]!.released).toBe(true);
    expect(world.ledger.counts()).toMatchObject({ live: 0, quarantined: 0, completed: 1, lateSuccesses: 1, timedOut: 1 });
  });

  it('refuses a request whose peer is not the one the ticket names, and banks given twice', async () => {
    const world = await openFakeWorld(1, 1);
    const [bank] = world.banks;
    const other = world.native.peer(2);
    expect(() =>
      world.ledger.post({ ...fakeRequest(world, [bank!]), peer: other }, { ticket: world.book.ticket(PEER), banks: [bank!] }),
    ).toThrow(/request\.peer = "decode-0": is not the native peer the ticket names/);
    expect(() => world.ledger.post(fakeRequest(world, [bank!]), { ticket: world.book.ticket(PEER), banks: [bank!, bank!] })).toThrow(/appears twice/);
    expect(() => world.ledger.post(fakeRequest(world, []), { ticket: world.book.ticket(PEER), banks: [] })).toThrow(/at least one local bank/);
    await flush();
    expect(bank!.references).toBe(0);
  });

  it('refuses deadlines that are not positive or leave no time between timeout and abandon', () => {
    const native = new FakeNative();
    const make = (timeouts: { operationTimeoutMs: number; abandonTimeoutMs: number }) =>
      new OperationLedger({ agent: native.agent, peers: new PeerBook(), timeouts, clock: new ManualClock() });
    expect(() => make({ operationTimeoutMs: 0, abandonTimeoutMs: 10 })).toThrow(InvalidDrainOptionError);
    expect(() => make({ operationTimeoutMs: 10, abandonTimeoutMs: 10 })).toThrow(/transport\.abandonTimeoutMs = 10 is refused: must exceed transport\.operationTimeoutMs/);
    expect(() => make({ operationTimeoutMs: 1.5, abandonTimeoutMs: 10 })).toThrow(/transport\.operationTimeoutMs = 1\.5/);
  });
});
