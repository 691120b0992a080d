// The ledger and drain controller over the real native layer (loopback backend, two agents in this
// process) with real registry banks. Deadlines run on a manual clock; completions are held with the
// native completion-delay fault and arrive through the agent's wake-up channel.
import { NativeTransportError } from '@kvreuse/native-bindings';
import {
  Bank,
  kvreuseOwner,
  RankRegistrationError,
  registerRank,
  type RegistrationAgent,
  releaseRank,
} from '@kvreuse/registry';
import { describe, expect, it } from 'vitest';
import { agentName, nextTurn, transport } from '../test/support/loopback-world.js';
import { loopbackWorlds } from '../test/support/loopback-worlds.js';
import { ManualClock } from '../test/support/manual-clock.js';
import {
  DrainingError,
  ForeignBankError,
  InvalidDrainOptionError,
  type LedgerOperation,
  OperationLedger,
  OperationRefusedError,
  PeerBook,
  PeerUnhealthyError,
} from './index.js';

const TIMEOUTS = { operationTimeoutMs: 100, abandonTimeoutMs: 300 };
const worlds = loopbackWorlds({ ranks: 2, banksPerRank: 2, timeouts: TIMEOUTS, shutdownDeadlineMs: 1000 });

async function world() {
  const clock = new ManualClock();
  return { world: await worlds.world({ clock }), clock };
}

describe('OperationLedger on the loopback backend', () => {
  it('holds a reference on every touched bank until the operation is quiescent, then releases it natively', async () => {
    const { world: w } = await world();
    w.reader.faults.delayCompletions('forever');
    const banks = [w.banks[0]!, w.banks[3]!];
    const operation = w.ledger.post(w.request(banks), { ticket: w.ticket(), banks });
    expect(operation.banks).toEqual(banks);
    expect(operation.localRegions).toEqual(banks.map((bank) => bank.region!.id));
    expect(operation.remoteRegions).toEqual([w.sourceRegion.id]);
    expect(operation.peer).toBe(w.source.name);
    expect(banks.map((bank) => bank.references)).toEqual([1, 1]);
    // The native layer refuses to deregister memory of an operation in progress; the ledger never asks.
    await expect(banks[0]!.region!.deregister()).rejects.toThrow(NativeTransportError);
    await nextTurn();
    expect(operation.phase).toBe('in-flight');
    w.reader.faults.clear();
    expect(await operation.outcome).toEqual({ ok: true, bytesDone: 2 * 4096 });
    expect(await operation.quiescence).toEqual({
      terminal: 'done',
      bytesDone: 2 * 4096,
      late: false,
      quarantined: false,
    });
    expect(banks.map((bank) => bank.references)).toEqual([0, 0]);
    expect(w.reader.counters().liveOperations).toBe(0);
    expect(w.ledger.counts()).toMatchObject({ live: 0, posted: 1, completed: 1 });
  });

  it('gives the outcome, quiescence and id of an operation first asked for after it quiesced', async () => {
    const { world: w, clock } = await world();
    const banks = [w.banks[1]!];
    const operation = w.ledger.post(w.request(banks), { ticket: w.ticket(), banks });
    // Nothing reads the operation until the ledger is idle: no operation live, not even this one.
    await w.ledger.settle(clock.now() + 1_000_000, clock.now() + 2_000_000, 'not expected');
    expect(operation.phase).toBe('quiescent');
    expect(operation.outcome).toBe(operation.outcome);
    expect(await operation.outcome).toEqual({ ok: true, bytesDone: 4096 });
    expect(await operation.quiescence).toEqual({ terminal: 'done', bytesDone: 4096, late: false, quarantined: false });
    expect(operation.id).toBe(`${w.reader.name}#${operation.nativeId}`);
    expect(w.ledger.counts()).toMatchObject({ live: 0, completed: 1 });
  });

  it('says "posted" within the post, once the banks are referenced, and not for a refused post', async () => {
    const { world: w } = await world();
    w.reader.faults.delayCompletions('forever');
    const seen: { id: string; references: number[] }[] = [];
    const stop = w.ledger.on('posted', (posted) =>
      seen.push({ id: posted.id, references: posted.banks.map((bank) => bank.references) }),
    );
    const banks = [w.banks[0]!, w.banks[1]!];
    const operation = w.ledger.post(w.request(banks), { ticket: w.ticket(), banks });
    expect(seen).toEqual([{ id: operation.id, references: [1, 1] }]);
    w.ledger.stopIntake();
    expect(() => w.ledger.post(w.request(banks), { ticket: w.ticket(), banks })).toThrow(DrainingError);
    expect(seen).toHaveLength(1);
    stop();
    w.reader.faults.clear();
    await operation.quiescence;
  });

  it('at the operation timeout fails the request, cancels (confirmed natively) and marks the peer unhealthy', async () => {
    const { world: w, clock } = await world();
    w.reader.faults.delayCompletions('forever');
    const operation = w.ledger.post(w.request([w.banks[1]!]), { ticket: w.ticket(), banks: [w.banks[1]!] });
    clock.advance(TIMEOUTS.operationTimeoutMs);
    const outcome = await operation.outcome;
    expect(outcome.ok).toBe(false);
    expect(!outcome.ok && outcome.error).toMatchObject({
      code: 'OPERATION_TIMED_OUT',
      setting: 'transport.operationTimeoutMs',
    });
    // A held loopback operation confirms its cancel at once.
    expect(await operation.quiescence).toMatchObject({ terminal: 'cancelled', code: 'CANCELED', quarantined: false });
    expect(w.banks[1]!.references).toBe(0);
    expect(w.book.health(w.source.name)).toMatchObject({
      healthy: false,
      reason: expect.stringContaining('timed out'),
    });
    expect(() => w.ledger.post(w.request([w.banks[1]!]), { ticket: w.ticket(), banks: [w.banks[1]!] })).toThrow(
      PeerUnhealthyError,
    );
    // Reloading the peer's metadata makes it usable again.
    w.book.track(w.source.name, 'incarnation-1', w.reader.loadPeer(w.source.metadata()));
    w.reader.faults.clear();
    const again = w.ledger.post(w.request([w.banks[1]!]), { ticket: w.ticket(), banks: [w.banks[1]!] });
    expect((await again.outcome).ok).toBe(true);
  });

  it('does not time out an operation that ended natively before its deadline, its completion not yet read', async () => {
    const { world: w, clock } = await world();
    const banks = [w.banks[1]!];
    const operation = w.ledger.post(w.request(banks), { ticket: w.ticket(), banks });
    // The JavaScript thread held (a long synchronous call): the progress thread ends the operation meanwhile, and
    // nothing reads its completion before the deadline is judged.
    const givenUpAt = performance.now() + 10_000;
    while (w.reader.counters().inflightOperations > 0 && performance.now() < givenUpAt);
    expect(w.reader.counters().inflightOperations).toBe(0);
    clock.advance(TIMEOUTS.operationTimeoutMs);
    expect(operation.phase).toBe('quiescent');
    expect(await operation.outcome).toEqual({ ok: true, bytesDone: 4096 });
    expect(w.ledger.counts()).toMatchObject({ live: 0, completed: 1, timedOut: 0 });
    expect(w.book.health(w.source.name)).toMatchObject({ healthy: true });
  });

  it('cancel gives up on an operation before its timeout: the request fails naming why, the peer stays healthy, no timeout follows', async () => {
    const { world: w, clock } = await world();
    w.reader.faults.delayCompletions('forever');
    const operation = w.ledger.post(w.request([w.banks[1]!]), { ticket: w.ticket(), banks: [w.banks[1]!] });
    w.ledger.cancel(operation, 'pin lost');
    const outcome = await operation.outcome;
    expect(!outcome.ok && outcome.error).toMatchObject({ code: 'OPERATION_TIMED_OUT', setting: 'pin lost' });
    expect(await operation.quiescence).toMatchObject({ terminal: 'cancelled', code: 'CANCELED', quarantined: false });
    expect(w.banks[1]!.references).toBe(0);
    clock.advance(TIMEOUTS.abandonTimeoutMs);
    expect(w.ledger.counts()).toMatchObject({ live: 0, timedOut: 0, cancelled: 1 });
    expect(w.book.health(w.source.name)).toMatchObject({ healthy: true });
    // Quiescent already: a second cancel changes nothing.
    w.ledger.cancel(operation, 'again');
    expect(w.ledger.counts()).toMatchObject({ live: 0, cancelled: 1 });
  });

  it('cancel refuses a why that is not a non-empty string, naming it, and leaves the operation in flight', async () => {
    const { world: w } = await world();
    w.reader.faults.delayCompletions('forever');
    const operation = w.ledger.post(w.request([w.banks[1]!]), { ticket: w.ticket(), banks: [w.banks[1]!] });
    for (const why of ['', undefined, 5])
      expect(() => w.ledger.cancel(operation, why as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'why', value: why }),
      );
    expect(operation.phase).toBe('in-flight');
    w.reader.faults.clear();
    expect(await operation.outcome).toEqual({ ok: true, bytesDone: 4096 });
    expect(w.ledger.counts()).toMatchObject({ live: 0, completed: 1, cancelled: 0 });
  });

  it('settle refuses times that are not finite, a quarantine before the cancel and an empty reason, cancelling nothing', async () => {
    const { world: w, clock } = await world();
    w.reader.faults.delayCompletions('forever');
    const operation = w.ledger.post(w.request([w.banks[1]!]), { ticket: w.ticket(), banks: [w.banks[1]!] });
    const now = clock.now();
    for (const [cancelAt, quarantineAt, reason, option, value] of [
      [Number.NaN, now, 'drain', 'cancelAt', Number.NaN],
      [Number.NEGATIVE_INFINITY, now, 'drain', 'cancelAt', Number.NEGATIVE_INFINITY],
      ['0', now, 'drain', 'cancelAt', '0'],
      [now, Number.NaN, 'drain', 'quarantineAt', Number.NaN],
      [now, Number.POSITIVE_INFINITY, 'drain', 'quarantineAt', Number.POSITIVE_INFINITY],
      [now, now - 1, 'drain', 'quarantineAt', now - 1],
      [now, now, '', 'reason', ''],
      [now, now, undefined, 'reason', undefined],
      [now, now, 5, 'reason', 5],
    ] as const) {
      await expect(w.ledger.settle(cancelAt as never, quarantineAt as never, reason as never)).rejects.toThrow(
        expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option, value }),
      );
      expect(operation.phase).toBe('in-flight');
    }
    await expect(w.ledger.settle(now, now - 1, 'drain')).rejects.toThrow(
      'quarantineAt = -1 is refused: must not be before cancelAt (0): operations are cancelled before they are quarantined',
    );
    expect(w.ledger.counts()).toMatchObject({ live: 1, cancelled: 0, timedOut: 0, quarantined: 0 });
    w.reader.faults.clear();
    expect(await operation.outcome).toEqual({ ok: true, bytesDone: 4096 });
  });

  it('a cancelled operation the native layer never confirms is quarantined at its abandon deadline, its bank retained', async () => {
    const { world: w, clock } = await world();
    w.reader.faults.delayCompletions('forever');
    const operation = w.ledger.post(w.request([w.banks[1]!]), { ticket: w.ticket(), banks: [w.banks[1]!] });
    w.reader.faults.stallProgress(true);
    w.ledger.cancel(operation, 'pin lost');
    expect((await operation.outcome).ok).toBe(false);
    expect(operation.phase).toBe('timed-out');
    clock.advance(TIMEOUTS.abandonTimeoutMs);
    expect(operation.phase).toBe('quarantined');
    expect(w.banks[1]!.references).toBe(1);
    w.reader.faults.stallProgress(false);
    w.reader.faults.clear();
    expect(await operation.quiescence).toMatchObject({ quarantined: true });
  });

  it('marks the peer unhealthy when an operation ends with REMOTE_DISCONNECT', async () => {
    const { world: w } = await world();
    w.reader.faults.failNth('completion', 1, 'REMOTE_DISCONNECT');
    const operation = w.ledger.post(w.request([w.banks[0]!]), { ticket: w.ticket(), banks: [w.banks[0]!] });
    const outcome = await operation.outcome;
    expect(!outcome.ok && outcome.error).toMatchObject({ code: 'OPERATION_FAILED', nativeCode: 'REMOTE_DISCONNECT' });
    expect(await operation.quiescence).toMatchObject({ terminal: 'failed', code: 'REMOTE_DISCONNECT' });
    expect(w.book.health(w.source.name)).toMatchObject({
      healthy: false,
      reason: expect.stringContaining('REMOTE_DISCONNECT'),
    });
  });

  it('releases the references of a post the native layer refuses, and refuses uncovered regions up front', async () => {
    const { world: w } = await world();
    w.reader.faults.failNth('post', 1, 'BACKEND');
    expect(() => w.ledger.post(w.request([w.banks[0]!]), { ticket: w.ticket(), banks: [w.banks[0]!] })).toThrow(
      NativeTransportError,
    );
    expect(w.banks[0]!.references).toBe(0);
    const uncovered = () =>
      w.ledger.post(w.request([w.banks[0]!, w.banks[1]!]), { ticket: w.ticket(), banks: [w.banks[0]!] });
    expect(uncovered).toThrow(OperationRefusedError);
    expect(uncovered).toThrow(/localRegions\[1\] = \d+: is the region of none of the banks given/);
    expect(w.ledger.counts().posted).toBe(0);
    expect(w.reader.counters()).toMatchObject({ operationsPosted: 0, liveOperations: 0 });
  });

  it('refuses a request whose peer is not the one the ticket names, banks given twice, and no banks', async () => {
    const { world: w } = await world();
    const [bank] = w.banks;
    const other = w.reader.loadPeer(w.reader.metadata());
    expect(() => w.ledger.post({ ...w.request([bank!]), peer: other }, { ticket: w.ticket(), banks: [bank!] })).toThrow(
      new RegExp(`request\\.peer = "${w.source.name}": is not the native peer the ticket names`),
    );
    expect(() => w.ledger.post(w.request([bank!]), { ticket: w.ticket(), banks: [bank!, bank!] })).toThrow(
      /appears twice/,
    );
    expect(() => w.ledger.post(w.request([bank!]), { ticket: w.ticket(), banks: [] })).toThrow(
      /at least one local bank/,
    );
    expect(bank!.references).toBe(0);
    expect(w.reader.counters().operationsPosted).toBe(0);
  });

  it('never reinstates a bank retained by a native refusal: a rollback that found it referenced', async () => {
    const { world: w } = await world();
    w.reader.faults.delayCompletions('forever');
    const allocations = await Promise.all([0, 1, 2].map(() => w.reader.allocate(1 << 16)));
    const banks = allocations.map((allocation, index) =>
      Bank.adopt(
        {
          tpRank: 2,
          ppRank: 0,
          index,
          memKind: 'dram',
          deviceId: 0,
          address: allocation.address,
          bytes: 1n << 16n,
          blocks: 1,
          blockStride: 1n << 16n,
        },
        kvreuseOwner(allocation),
      ),
    );
    // The ledger posts on bank 0 while registerRank waits between banks, and the registration is then aborted.
    const abort = new AbortController();
    let registrations = 0;
    let operation: LedgerOperation | undefined;
    const agent: RegistrationAgent = {
      name: w.reader.name,
      register(memory) {
        const region = w.reader.register(memory);
        if (++registrations === 2) {
          operation = w.ledger.post(w.request([banks[0]!]), { ticket: w.ticket(), banks: [banks[0]!] });
          abort.abort(new Error('shutting down'));
        }
        return region;
      },
    };
    const error = await registerRank({ agent, banks, signal: abort.signal }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RankRegistrationError);
    expect([banks[0]!.state, banks[0]!.retainedBy, banks[0]!.references]).toEqual(['retained', 'native-refusal', 1]);

    w.reader.faults.clear();
    expect(await operation!.quiescence).toMatchObject({ terminal: 'done', quarantined: false });
    // Nothing holds it any more, but its rank's registration failed: it may only be released.
    expect([banks[0]!.state, banks[0]!.retainedBy, banks[0]!.references]).toEqual(['retained', 'native-refusal', 0]);
    expect(() => w.ledger.post(w.request([banks[0]!]), { ticket: w.ticket(), banks: [banks[0]!] })).toThrow(
      OperationRefusedError,
    );
    await releaseRank({ tpRank: 2, ppRank: 0, agent, banks: [banks[0]!] });
    expect(banks[0]!.state).toBe('returned');
    for (const allocation of allocations.slice(1)) await allocation.free();
  });

  it("refuses a bank of another agent whose region has the same id, and a request region that is not the bank's own", async () => {
    const { world: w } = await world();
    // Another agent of this process registers one bank; region ids are per agent, so its region has
    // the id of the reader's bank 0.
    const other = await transport.createAgent({ name: agentName('other'), backend: 'loopback' });
    const memory = await other.allocate(1 << 16);
    const foreign = Bank.adopt(
      {
        tpRank: 0,
        ppRank: 0,
        index: 0,
        memKind: 'dram',
        deviceId: 0,
        address: memory.address,
        bytes: 1n << 16n,
        blocks: 1,
        blockStride: 1n << 16n,
      },
      kvreuseOwner(memory),
    );
    const foreignRank = await registerRank({ agent: other, banks: [foreign] });
    const own = w.banks[0]!;
    expect(foreign.region!.id).toBe(own.region!.id);

    // The request writes into the reader's bank 0, but the bank given is the other agent's.
    const wrongBank = () => w.ledger.post(w.request([own]), { ticket: w.ticket(), banks: [foreign] });
    expect(wrongBank).toThrow(ForeignBankError);
    expect(wrongBank).toThrow(
      expect.objectContaining({
        code: 'FOREIGN_BANK',
        subject: 'banks[0]',
        bankAgent: other.name,
        ledgerAgent: w.reader.name,
        regionId: own.region!.id,
      }),
    );
    // The request names the other agent's region, the bank given is the reader's own with the same id.
    const wrongRegion = () =>
      w.ledger.post({ ...w.request([own]), localRegions: [foreign.region!] }, { ticket: w.ticket(), banks: [own] });
    expect(wrongRegion).toThrow(
      expect.objectContaining({ code: 'FOREIGN_BANK', subject: 'localRegions[0]', bankAgent: w.reader.name }),
    );
    expect(wrongRegion).toThrow(/the same id, not the same region/);

    expect([own.references, foreign.references]).toEqual([0, 0]);
    expect(w.ledger.counts().posted).toBe(0);
    expect(w.reader.counters().operationsPosted).toBe(0);
    await releaseRank(foreignRank);
    await other.close();
  });

  it('refuses options of the wrong shape with a typed error naming the option', async () => {
    const { world: w } = await world();
    const request = w.request([w.banks[0]!]);
    const refused = (post: () => unknown, option: string) =>
      expect(post).toThrow(expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option }));
    refused(() => w.ledger.post(request, {} as never), 'options.ticket');
    refused(() => w.ledger.post(request, undefined as never), 'options');
    refused(() => w.ledger.post(request, { ticket: w.ticket() } as never), 'options.banks');
    refused(
      () => w.ledger.post(request, { ticket: w.ticket(), banks: [w.banks[0]!.label()] } as never),
      'options.banks[0]',
    );
    refused(
      () => w.ledger.post(request, { ticket: { ...w.ticket(), generation: 1 }, banks: [w.banks[0]!] } as never),
      'options.ticket.generation',
    );
    refused(() => w.ledger.post(undefined as never, { ticket: w.ticket(), banks: [w.banks[0]!] }), 'request');
    refused(
      () =>
        w.ledger.post({ ...request, localRegions: undefined } as never, { ticket: w.ticket(), banks: [w.banks[0]!] }),
      'request.localRegions',
    );
    expect(w.banks[0]!.references).toBe(0);

    const timeouts = { operationTimeoutMs: 10, abandonTimeoutMs: 20 };
    refused(() => new OperationLedger(undefined as never), 'options');
    refused(() => new OperationLedger({ peers: new PeerBook(), timeouts } as never), 'agent');
    refused(
      () => new OperationLedger({ agent: { name: 'a' }, peers: new PeerBook(), timeouts } as never),
      'agent.post',
    );
    refused(() => new OperationLedger({ agent: w.reader, timeouts } as never), 'peers');
    refused(() => new OperationLedger({ agent: w.reader, peers: new PeerBook() } as never), 'timeouts');
    refused(
      () => new OperationLedger({ agent: w.reader, peers: new PeerBook(), timeouts, clock: { now: () => 0 } } as never),
      'clock.setTimer',
    );
  });

  it('refuses deadlines that are not positive integers or leave no time between timeout and abandon', async () => {
    const { world: w } = await world();
    const make = (timeouts: { operationTimeoutMs: number; abandonTimeoutMs: number }) =>
      new OperationLedger({ agent: w.reader, peers: new PeerBook(), timeouts });
    expect(() => make({ operationTimeoutMs: 0, abandonTimeoutMs: 10 })).toThrow(InvalidDrainOptionError);
    expect(() => make({ operationTimeoutMs: 10, abandonTimeoutMs: 10 })).toThrow(
      /transport\.abandonTimeoutMs = 10 is refused: must exceed transport\.operationTimeoutMs/,
    );
    expect(() => make({ operationTimeoutMs: 1.5, abandonTimeoutMs: 10 })).toThrow(
      /transport\.operationTimeoutMs = 1\.5/,
    );
  });

  it('drains: DRAINING for new posts, waits for in-flight operations, hands banks back in reverse registration order', async () => {
    const { world: w } = await world();
    w.reader.faults.delayCompletions('forever');
    const done = w.ledger.post(w.request([w.banks[0]!]), { ticket: w.ticket(), banks: [w.banks[0]!] });
    const held = w.ledger.post(w.request([w.banks[2]!]), { ticket: w.ticket(), banks: [w.banks[2]!] });
    const draining = w.controller.drain({ deadlineMs: 50 });
    expect(() => w.ledger.post(w.request([w.banks[1]!]), { ticket: w.ticket(), banks: [w.banks[1]!] })).toThrow(
      DrainingError,
    );
    expect(() => w.ledger.post(w.request([w.banks[1]!]), { ticket: w.ticket(), banks: [w.banks[1]!] })).toThrow(
      expect.objectContaining({ code: 'DRAINING' }),
    );
    w.reader.faults.clear();
    await done.quiescence;
    await held.quiescence;
    const report = await draining;
    expect(report).toMatchObject({ completed: 2, cancelled: 0, failed: 0, quarantined: [], banksRetained: [] });
    expect(report.banksReturned.map((bank) => [bank.tpRank, bank.index])).toEqual([
      [1, 1],
      [1, 0],
      [0, 1],
      [0, 0],
    ]);
    expect(w.banks.every((bank) => bank.state === 'returned')).toBe(true);
    expect(w.reader.counters()).toMatchObject({ liveRegistrations: 0, liveAllocations: 0, liveOperations: 0 });
    expect(await w.controller.drain({ deadlineMs: 0 })).toBe(report);
  });

  it('cancels what is still held shortly before the drain deadline', async () => {
    const { world: w, clock } = await world();
    w.reader.faults.delayCompletions('forever');
    const held = w.ledger.post(w.request([w.banks[3]!]), { ticket: w.ticket(), banks: [w.banks[3]!] });
    const draining = w.controller.drain({ deadlineMs: 50 });
    // The cancel goes out a tenth before the deadline; the native layer confirms it before the deadline.
    clock.advance(45);
    expect((await held.quiescence).terminal).toBe('cancelled');
    clock.advance(5);
    const report = await draining;
    expect(report).toMatchObject({ completed: 0, cancelled: 1, quarantined: [], banksRetained: [] });
    expect(report.banksReturned).toHaveLength(4);
    expect(await held.outcome).toMatchObject({
      ok: false,
      error: { code: 'OPERATION_TIMED_OUT', setting: 'not quiescent at the drain deadline (50 ms)' },
    });
  });

  it('shuts down once, invalidating peers and destroying the agent', async () => {
    const { world: w } = await world();
    const first = w.controller.shutdown();
    expect(w.controller.shutdown()).toBe(first);
    const result = await first;
    expect(result.steps.find((step) => step.step === 'invalidate-peers')).toMatchObject({
      outcome: 'ok',
      detail: w.source.name,
    });
    expect(result.steps.find((step) => step.step === 'destroy-agent')).toMatchObject({
      outcome: 'ok',
      detail: 'destroyed',
    });
    expect(result).toMatchObject({ retained: false, agentDestroyed: true, banksRetained: [], quarantined: [] });
    expect(w.reader.isOpen).toBe(false);
  });
});
