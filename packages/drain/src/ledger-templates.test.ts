// Template posts (`agent.postBlocks`) through the ledger, on the loopback backend with real registry
// banks: the same references, deadlines and quiescence as explicit posts.
import {
  assembleWorker,
  buildTransferTemplate,
  type Geometry,
  layoutRankBanks,
  type Worker,
} from '@kvreuse/descriptors';
import type { RegisteredTemplate } from '@kvreuse/native-bindings';
import { describe, expect, it } from 'vitest';
import { nextTurn } from '../test/support/loopback-world.js';
import { loopbackWorlds } from '../test/support/loopback-worlds.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { DrainingError, OperationRefusedError } from './index.js';

const TIMEOUTS = { operationTimeoutMs: 100, abandonTimeoutMs: 300 };
const worlds = loopbackWorlds({ ranks: 2, banksPerRank: 2, timeouts: TIMEOUTS, shutdownDeadlineMs: 1000 });

// One layer, two planes: banks 0 (keys) and 1 (values) on each side, 64 bytes per block and plane.
const geometry: Geometry = {
  numLayers: 1,
  kvPlanes: 2,
  blockTokens: 4,
  numKvHeads: 1,
  headDim: 8,
  dtype: 'bf16',
  bankLayout: 'layer-separate',
  headOrder: 'HND',
};
const BLOCK_BYTES = 2 * 64;

function worker(workerId: string): Worker {
  const parallel = { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1, dpRank: 0 };
  const banks = layoutRankBanks(geometry, parallel, { address: 0x1000n, blocks: 8 });
  const result = assembleWorker([
    {
      version: 1,
      workerId,
      incarnation: `${workerId}-1`,
      role: 'decode',
      geometry,
      parallel,
      banks,
      transport: { agentName: workerId, generation: 1, metadata: '' },
    },
  ]);
  if (!result.complete) throw new Error('incomplete test worker');
  return result.worker;
}

async function world() {
  const clock = new ManualClock();
  const w = await worlds.world({ clock });
  // The reader's rank 0 banks 0 and 1 receive; both source banks are views of the source's one region.
  const template: RegisteredTemplate = w.reader.registerTemplate({
    peer: w.peer,
    template: buildTransferTemplate(worker('source'), worker('reader')),
    direction: 'read',
    localRegions: [w.banks[0]!.region!, w.banks[1]!.region!],
    remoteRegions: [w.sourceRegion.id, w.sourceRegion.id],
  });
  const blocks = (count: number) => ({
    template,
    sourceBlocks: Uint32Array.from({ length: count }, (_, i) => i),
    destinationBlocks: Uint32Array.from({ length: count }, (_, i) => count - 1 - i),
  });
  return { w, clock, template, blocks, banks: [w.banks[0]!, w.banks[1]!] };
}

describe('OperationLedger.postBlocks', () => {
  it('holds a reference on every bank of the pair until the operation is quiescent', async () => {
    const { w, blocks, banks } = await world();
    w.reader.faults.delayCompletions('forever');
    const operation = w.ledger.postBlocks(blocks(3), { ticket: w.ticket(), banks });
    expect(operation).toMatchObject({
      blockPairs: 3,
      remoteRegions: [],
      localRegions: banks.map((bank) => bank.region!.id),
      peer: w.source.name,
    });
    expect(banks.map((bank) => bank.references)).toEqual([1, 1]);
    await nextTurn();
    expect(operation.phase).toBe('in-flight');
    w.reader.faults.clear();
    expect(await operation.outcome).toEqual({ ok: true, bytesDone: 3 * BLOCK_BYTES });
    expect(await operation.quiescence).toEqual({
      terminal: 'done',
      bytesDone: 3 * BLOCK_BYTES,
      late: false,
      quarantined: false,
    });
    expect(banks.map((bank) => bank.references)).toEqual([0, 0]);
    expect(w.ledger.counts()).toMatchObject({ live: 0, posted: 1, completed: 1 });
  });

  it('fails the request at the operation timeout and keeps the banks until the cancel is confirmed', async () => {
    const { w, clock, blocks, banks } = await world();
    w.reader.faults.delayCompletions('forever');
    const operation = w.ledger.postBlocks(blocks(2), { ticket: w.ticket(), banks });
    clock.advance(TIMEOUTS.operationTimeoutMs);
    expect(await operation.outcome).toMatchObject({ ok: false, error: { code: 'OPERATION_TIMED_OUT' } });
    expect((await operation.quiescence).terminal).toBe('cancelled');
    expect(banks.map((bank) => bank.references)).toEqual([0, 0]);
  });

  it('refuses banks that miss a bank of the pair, a wrong peer, a refused native post (releasing its references) and posts while draining', async () => {
    const { w, blocks, banks } = await world();
    expect(() => w.ledger.postBlocks(blocks(1), { ticket: w.ticket(), banks: [banks[0]!] })).toThrow(
      OperationRefusedError,
    );
    expect(() => w.ledger.postBlocks(blocks(1), { ticket: w.ticket(), banks: [banks[0]!, w.banks[3]!] })).toThrow(
      /hold no bank 1 of rank \(tp 0, pp 0\)/,
    );
    w.reader.faults.failNth('post', 1, 'BUSY');
    expect(() => w.ledger.postBlocks(blocks(1), { ticket: w.ticket(), banks })).toThrow(
      expect.objectContaining({ code: 'BUSY' }),
    );
    expect(banks.map((bank) => bank.references)).toEqual([0, 0]);
    const { template } = blocks(1);
    expect(() =>
      w.ledger.postBlocks(
        { ...blocks(1), template: { ...template, peer: {} } as never },
        { ticket: w.ticket(), banks },
      ),
    ).toThrow(/not the native peer the ticket names/);
    w.ledger.stopIntake();
    expect(() => w.ledger.postBlocks(blocks(1), { ticket: w.ticket(), banks })).toThrow(DrainingError);
    expect(w.ledger.counts()).toMatchObject({ posted: 0, live: 0 });
  });
});
