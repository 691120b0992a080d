// ReuseEndpoint across OS processes on ucx: a serving decode worker of TP 2 in a child process
// (test/process/ucx-serving-worker.ts), a prefill worker of TP 1 here, one SQLite discovery file.
import { watchWorkerReadiness, type WorkerReadiness } from '@kvreuse/discovery';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startChild } from '../test/support/child-process.js';
import { BLOCKS, hintFor, sqliteDiscovery, transport, ucxPrefill } from '../test/support/endpoint-workers.js';

// Like pull-ucx.test.ts: skipped where UCX is not built, except under CI, which requires it.
const inCi = !['', '0', 'false', undefined].includes(process.env['CI']);
const ucxTestsRun = inCi || transport.capabilities().backends.includes('ucx');
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface ChildLine {
  readonly event: 'ready' | 'draining' | 'drained';
  readonly incarnation?: string;
  readonly epoch?: number;
  readonly drained?: {
    pins: { readerAgent: string; blocks: number; ended?: string }[];
    readers: unknown;
    banksReturned: number;
    banksRetained: number;
  }[];
}

/** The serving decode worker in a child process (under `launcher` when given) and this process's prefill rank. */
async function openServingAndReader(launcher: readonly string[] = []) {
  const { path, store } = sqliteDiscovery(cleanups);
  const serving = startChild<ChildLine>('test/process/ucx-serving-worker.ts', [path], cleanups, {}, launcher);
  const prefill = await ucxPrefill(store, path, cleanups);
  const ready = await serving.next('ready');
  const source = { workerId: 'decode-0', incarnation: ready.incarnation!, epoch: ready.epoch! };
  return { store, serving, source, reader: prefill.ranks[0]! };
}

describe.skipIf(!ucxTestsRun)('ReuseEndpoint across processes on ucx', () => {
  it('a prefill rank pulls and verifies from both ranks of a serving process; the source’s SIGTERM drain waits for the reader’s pins', async () => {
    const { store, serving, source, reader } = await openServingAndReader();

    const receipt = await reader.endpoint.pull({
      hint: hintFor(source, BLOCKS),
      destinationBlocks: Uint32Array.from({ length: BLOCKS }, (_, i) => BLOCKS - 1 - i),
    });
    const blockBytes = 2 * 2 * 4 * 2 * 8 * 2;
    expect(receipt).toMatchObject({
      requested: BLOCKS,
      blocks: BLOCKS,
      bytesMoved: BLOCKS * blockBytes,
      checkedBlocks: BLOCKS,
      recomputed: { reasons: [] },
    });

    // The reader holds its pins while its reads are held in flight; the source is told to stop.
    const seen: WorkerReadiness[] = [];
    const watch = await watchWorkerReadiness(store, 'decode-0', { onChange: (readiness) => seen.push(readiness) });
    cleanups.push(() => watch.close());
    reader.agent.faults.delayCompletions('forever');
    const pulling = reader.endpoint.pull({ hint: hintFor(source, 4), destinationBlocks: Uint32Array.of(0, 1, 2, 3) });
    await vi.waitFor(() => expect(reader.endpoint.ledger.counts().posted).toBe(4), { timeout: 60_000, interval: 10 });
    serving.child.kill('SIGTERM');
    await serving.next('draining');
    await vi.waitFor(() => expect(seen.at(-1)?.ready).toBe(false), { timeout: 60_000, interval: 10 });
    reader.agent.faults.clear();
    expect(await pulling).toMatchObject({ blocks: 4, checkedBlocks: 4, recomputed: { reasons: [] } });
    const { drained } = await serving.next('drained');
    expect(drained).toHaveLength(2);
    for (const rank of drained!) {
      expect(rank).toMatchObject({
        readers: { released: 1, lapsed: 0, outstanding: 0 },
        pins: [{ readerAgent: reader.agent.name, blocks: 4, ended: 'released' }],
        banksRetained: 0,
      });
      expect(rank.banksReturned).toBeGreaterThan(0);
    }
  }, 180_000);

  // A container beside this one: the serving process is pid 1 of a new pid namespace (as `unshare --pid --fork
  // --mount-proc` runs it; --kill-child ends it with the launcher). Its agents are reached through their network
  // addresses, over which the pins' messages and the heartbeat's answers come back.
  it.runIf(process.getuid?.() === 0 || inCi)(
    'a prefill rank pulls and verifies from a serving process in another pid namespace',
    async () => {
      const { source, reader } = await openServingAndReader(['unshare', '--pid', '--mount-proc', '--kill-child']);
      const receipt = await reader.endpoint.pull({
        hint: hintFor(source, BLOCKS),
        destinationBlocks: Uint32Array.from({ length: BLOCKS }, (_, i) => i),
      });
      expect(receipt).toMatchObject({ requested: BLOCKS, blocks: BLOCKS, checkedBlocks: BLOCKS });
      const peers = reader.agent.peers();
      expect(peers.length).toBeGreaterThan(0);
      for (const peer of peers)
        expect(peer.transport()).toContain('in another pid namespace, reached through its network address');
    },
    180_000,
  );
});
