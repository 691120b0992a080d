// Fixed interleavings of the model-based test, spelled out: the ones the loopback backend cannot
// produce on demand (a cancel the native layer does not confirm, a success after the timeout, a
// quarantined operation that ends before a drain, during one, or after shutdown), over the model
// test's fake native layer. The same
// cycle runs for real over ucx in ucx-source-cut.test.ts (source SIGSTOPped mid-pull).
import { describe, expect, it } from 'vitest';
import { OperationRefusedError } from '../src/index.js';
import type { FakeRegion } from './support/fake-native.js';
import { fakeRequest, flush, openFakeWorld, PEER, TIMEOUTS } from './support/fake-world.js';

describe('model cases: quarantine and late quiescence', () => {
  it('reinstates the banks of a quarantined operation the native layer ends before any drain: back in service at once', async () => {
    const world = await openFakeWorld(1, 2);
    const [first, second] = world.banks;
    const registrations = world.banks.map((bank) => bank.region);
    const owners = world.banks.map((bank) => bank.owner);
    const seenByQuiesced: string[] = [];
    world.ledger.on('quiesced', (operation) => seenByQuiesced.push(...operation.banks.map((bank) => bank.state)));
    const operation = world.ledger.post(fakeRequest(world, [first!, second!]), {
      ticket: world.book.ticket(PEER),
      banks: [first!, second!],
    });
    world.clock.advance(TIMEOUTS.abandonTimeoutMs);
    expect([first!.state, first!.retainedBy, second!.state, second!.retainedBy]).toEqual([
      'retained',
      'quarantine',
      'retained',
      'quarantine',
    ]);

    world.native.operations[0]!.fail('CANCELED');
    expect(await operation.quiescence).toMatchObject({ terminal: 'cancelled', quarantined: true });
    // Registered again — the same native registration, the same owner, referenced by nothing — before `quiesced` fires.
    expect(seenByQuiesced).toEqual(['registered', 'registered']);
    expect(world.banks.map((bank) => [bank.state, bank.references, bank.retainedBy, bank.retainedReason])).toEqual([
      ['registered', 0, undefined, undefined],
      ['registered', 0, undefined, undefined],
    ]);
    expect(world.banks.map((bank) => bank.region)).toEqual(registrations);
    expect(world.banks.map((bank) => bank.owner)).toEqual(owners);
    expect(registrations.every((region) => !(region as unknown as FakeRegion).deregistered)).toBe(true);
    expect(world.handedBack.size).toBe(0);
    expect(world.ledger.quarantined()).toEqual([]);

    // In service: it takes a new operation (once the peer, marked unhealthy by the timeout, is reloaded).
    world.book.track(PEER, 'incarnation-1', world.peer);
    const again = world.ledger.post(fakeRequest(world, [first!]), { ticket: world.book.ticket(PEER), banks: [first!] });
    world.native.operations[1]!.complete();
    expect(await again.outcome).toEqual({ ok: true, bytesDone: 4096 });
    const report = await world.controller.drain({ deadlineMs: 0 });
    expect(report).toMatchObject({ quarantined: [], banksRetained: [] });
    expect(report.banksReturned).toHaveLength(2);
    expect(world.native.violations).toEqual([]);
  });

  it('keeps a bank retained while another operation still holds it, and reinstates it when that one ends', async () => {
    const world = await openFakeWorld(1, 2);
    const [first, second] = world.banks;
    const quarantinedOne = world.ledger.post(fakeRequest(world, [first!, second!]), {
      ticket: world.book.ticket(PEER),
      banks: [first!, second!],
    });
    world.clock.advance(TIMEOUTS.operationTimeoutMs);
    world.book.track(PEER, 'incarnation-1', world.peer);
    const sharing = world.ledger.post(fakeRequest(world, [second!]), {
      ticket: world.book.ticket(PEER),
      banks: [second!],
    });
    world.clock.advance(TIMEOUTS.abandonTimeoutMs - TIMEOUTS.operationTimeoutMs);
    expect([quarantinedOne.phase, sharing.phase]).toEqual(['quarantined', 'timed-out']);
    expect([second!.state, second!.references]).toEqual(['retained', 2]);

    world.native.operations[0]!.complete();
    await quarantinedOne.quiescence;
    expect([first!.state, first!.references]).toEqual(['registered', 0]);
    expect([second!.state, second!.references, second!.retainedBy]).toEqual(['retained', 1, 'quarantine']);

    // The sharing operation was never quarantined, but it held the last reference.
    world.native.operations[1]!.fail('CANCELED');
    expect(await sharing.quiescence).toMatchObject({ terminal: 'cancelled', quarantined: false });
    expect([second!.state, second!.references]).toEqual(['registered', 0]);
    expect(world.native.violations).toEqual([]);
  });

  it('does not reinstate a bank whose quarantined operation ends while a drain runs: the drain hands it back', async () => {
    const world = await openFakeWorld(2, 1);
    const [quarantinedBank, busyBank] = world.banks;
    const quarantined = world.ledger.post(fakeRequest(world, [quarantinedBank!]), {
      ticket: world.book.ticket(PEER),
      banks: [quarantinedBank!],
    });
    world.clock.advance(TIMEOUTS.abandonTimeoutMs);
    world.book.track(PEER, 'incarnation-1', world.peer);
    const busy = world.ledger.post(fakeRequest(world, [busyBank!]), {
      ticket: world.book.ticket(PEER),
      banks: [busyBank!],
    });
    const draining = world.controller.drain({ deadlineMs: 100 });
    world.native.operations[0]!.complete();
    await quarantined.quiescence;
    expect([quarantinedBank!.state, quarantinedBank!.references]).toEqual(['retained', 0]);
    world.native.operations[1]!.complete();
    await busy.quiescence;
    const report = await draining;
    expect(report).toMatchObject({ quarantined: [], banksRetained: [] });
    expect(report.banksReturned.map((bank) => bank.tpRank)).toEqual([1, 0]);
    expect(world.banks.map((bank) => bank.state)).toEqual(['returned', 'returned']);
    expect(world.native.violations).toEqual([]);
  });

  it('quarantines an operation whose cancel is not confirmed by the abandon deadline, retaining its banks', async () => {
    const world = await openFakeWorld(1, 2);
    const [bank] = world.banks;
    const quarantined: string[] = [];
    world.ledger.on('quarantined', (operation) => quarantined.push(operation.id));
    const operation = world.ledger.post(fakeRequest(world, [bank!]), {
      ticket: world.book.ticket(PEER),
      banks: [bank!],
    });
    world.clock.advance(TIMEOUTS.operationTimeoutMs);
    expect(operation.phase).toBe('timed-out');
    expect(world.native.operations[0]!.cancelRequested).toBe(true);
    world.clock.advance(TIMEOUTS.abandonTimeoutMs - TIMEOUTS.operationTimeoutMs);
    expect(operation.phase).toBe('quarantined');
    expect(quarantined).toEqual([operation.id]);
    expect(bank!.state).toBe('retained');
    expect(bank!.retainedReason).toBe(
      `quarantined: operation ${operation.id} not terminal 250 ms after it was posted (transport.abandonTimeoutMs)`,
    );
    expect(world.ledger.quarantined()).toEqual([
      {
        id: operation.id,
        peer: PEER,
        banks: [expect.objectContaining({ index: 0 })],
        reason: expect.stringContaining('abandonTimeoutMs'),
      },
    ]);
    // A retained bank takes no new operation.
    world.book.track(PEER, 'incarnation-1', world.peer);
    expect(() =>
      world.ledger.post(fakeRequest(world, [bank!]), { ticket: world.book.ticket(PEER), banks: [bank!] }),
    ).toThrow(OperationRefusedError);
    expect(bank!.references).toBe(1);
  });

  it('keeps a timed-out request failed when the native layer later reports success, and says it was late', async () => {
    const world = await openFakeWorld(1, 1);
    const [bank] = world.banks;
    const quiesced: boolean[] = [];
    world.ledger.on('quiesced', (_operation, quiescence) => quiesced.push(quiescence.late));
    const operation = world.ledger.post(fakeRequest(world, [bank!]), {
      ticket: world.book.ticket(PEER),
      banks: [bank!],
    });
    world.clock.advance(TIMEOUTS.abandonTimeoutMs);
    expect(operation.phase).toBe('quarantined');
    world.native.operations[0]!.complete();
    expect(await operation.quiescence).toEqual({ terminal: 'done', bytesDone: 4096, late: true, quarantined: true });
    expect(await operation.outcome).toMatchObject({ ok: false, error: { code: 'OPERATION_TIMED_OUT' } });
    expect(quiesced).toEqual([true]);
    expect(bank!.references).toBe(0);
    expect(bank!.state).toBe('registered');
    expect(world.native.operations[0]!.released).toBe(true);
    expect(world.ledger.counts()).toMatchObject({
      live: 0,
      quarantined: 0,
      completed: 1,
      lateSuccesses: 1,
      timedOut: 1,
    });
  });
  it('reports a quarantined operation and retains its bank; later quiescence hands it back and destroys the agent', async () => {
    const world = await openFakeWorld(2, 1);
    const [first, second] = world.banks;
    const operation = world.ledger.post(fakeRequest(world, [second!]), {
      ticket: world.book.ticket(PEER),
      banks: [second!],
    });
    const released: number[] = [];
    let destroyed = false;
    world.controller.on('released', (_operation, banks) => released.push(...banks.map((bank) => bank.tpRank)));
    world.controller.on('agent-destroyed', () => (destroyed = true));
    const shutdown = world.controller.shutdown();
    world.clock.advance(400);
    const result = await shutdown;
    expect(result.report.quarantined).toEqual([
      expect.objectContaining({ id: operation.id, reason: expect.stringContaining('transport.abandonTimeoutMs') }),
    ]);
    expect(result.report.banksReturned.map((bank) => bank.tpRank)).toEqual([0]);
    expect(result.report.banksRetained).toEqual([
      {
        bank: expect.objectContaining({ tpRank: 1 }),
        retainedBy: 'quarantine',
        reason: expect.stringContaining('quarantined'),
      },
    ]);
    expect(result).toMatchObject({ retained: true, agentDestroyed: false });
    expect(result.steps.find((step) => step.step === 'destroy-agent')).toMatchObject({
      step: 'destroy-agent',
      outcome: 'failed',
      error: 'kept: 1 quarantined operations are not terminal',
    });
    expect(first!.state).toBe('returned');
    expect(second!.state).toBe('retained');
    expect(world.handedBack.get(second!)).toBeUndefined();

    world.native.operations[0]!.fail('CANCELED');
    await flush();
    expect(released).toEqual([1]);
    expect(second!.state).toBe('returned');
    expect(world.handedBack.get(second!)).toBe(1);
    expect(destroyed).toBe(true);
    expect(world.native.closed).toBe(true);
    expect(world.native.violations).toEqual([]);
  });
});
