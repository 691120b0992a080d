// Fixed interleavings of the model-based test, spelled out: the ones the loopback backend cannot
// produce on demand (a cancel the native layer does not confirm, a success after the timeout, a
// quarantined operation that ends after shutdown), over the model test's fake native layer. The same
// cycle runs for real over ucx in ucx-source-cut.test.ts (source SIGSTOPped mid-pull).
import { describe, expect, it } from 'vitest';
import { OperationRefusedError } from '../src/index.js';
import { fakeRequest, flush, openFakeWorld, PEER, TIMEOUTS } from './support/fake-world.js';

describe('model cases: quarantine and late quiescence', () => {
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
  it('reports a quarantined operation and retains its bank; later quiescence hands it back and destroys the agent', async () => {
    const world = await openFakeWorld(2, 1);
    const [first, second] = world.banks;
    const operation = world.ledger.post(fakeRequest(world, [second!]), { ticket: world.book.ticket(PEER), banks: [second!] });
    const released: number[] = [];
    let destroyed = false;
    world.controller.on('released', (_operation, banks) => released.push(...banks.map((bank) => bank.tpRank)));
    world.controller.on('agent-destroyed', () => (destroyed = true));
    const shutdown = world.controller.shutdown();
    world.clock.advance(400);
    const result = await shutdown;
    expect(result.report.quarantined).toEqual([expect.objectContaining({ id: operation.id, reason: expect.stringContaining('transport.abandonTimeoutMs') })]);
    expect(result.report.banksReturned.map((bank) => bank.tpRank)).toEqual([0]);
    expect(result.report.banksRetained).toEqual([{ bank: expect.objectContaining({ tpRank: 1 }), reason: expect.stringContaining('quarantined') }]);
    expect(result).toMatchObject({ retained: true, agentDestroyed: false });
    expect(result.steps.find((step) => step.step === 'destroy-agent')).toEqual({
      step: 'destroy-agent',
      ok: false,
      detail: 'kept: 1 quarantined operations are not terminal',
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
