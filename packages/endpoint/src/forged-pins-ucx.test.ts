// Forged pin messages across OS processes on ucx, one SQLite discovery file: a serving decode worker
// of TP 2 (test/process/ucx-serving-worker.ts), an honest reader, and an intruder process without the
// cluster secret whose agent is named after the honest reader (test/process/pin-intruder.ts). The
// source refuses every forged message as unauthenticated and counts it; the honest pull completes, and
// a killed reader's pin lapses with its lease whatever the intruder renews.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startChild } from '../test/support/child-process.js';
import { BLOCKS, hintFor, sqliteDiscovery, transport, ucxPrefill } from '../test/support/endpoint-workers.js';
import { defaultSettings } from '../test/support/settings.js';
import type { PinMessageRefusal } from './pin-auth.js';

// Like pull-ucx.test.ts: skipped where UCX is not built, except under CI, which requires it.
const inCi = !['', '0', 'false', undefined].includes(process.env['CI']);
const ucxTestsRun = inCi || transport.capabilities().backends.includes('ucx');
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface SourceLine {
  readonly event: 'ready' | 'state';
  readonly incarnation?: string;
  readonly epoch?: number;
  readonly agents?: { readonly name: string; readonly metadata: string }[];
  readonly ranks?: { readonly pinsHeld: number; readonly refused: Record<PinMessageRefusal, number> }[];
}

const noRefusals = { unauthenticated: 0, malformed: 0, 'not-reader': 0, 'not-source': 0, replayed: 0 };

/** The serving worker over a new SQLite file, ready; `state(advance)` asks for its ranks' pins and refusals. */
async function servingSource() {
  const { path, store } = sqliteDiscovery(cleanups);
  const serving = startChild<SourceLine>('test/process/ucx-serving-worker.ts', [path], cleanups);
  const ready = await serving.next('ready');
  const state = async (advance?: number) => {
    serving.send(advance === undefined ? {} : { advance });
    return (await serving.next('state')).ranks!;
  };
  return { path, store, ready, state };
}

/**
 * The intruder: no secret, its agent named `readerName`, handed the source's worker addresses directly.
 * Since metadata is sealed, reading discovery would not give them; the test plays the leak.
 */
async function intrude(readerName: string, ready: SourceLine, kind: 'release' | 'renew', count: number) {
  const metadata = ready.agents!.map((agent) => agent.metadata).join(',');
  const intruder = startChild<{ event: 'sent'; sent: number }>(
    'test/process/pin-intruder.ts',
    [readerName, metadata, kind, String(count)],
    cleanups,
  );
  expect(await intruder.next('sent')).toEqual({ event: 'sent', sent: count * ready.agents!.length });
}

describe.skipIf(!ucxTestsRun)('forged pin messages across processes on ucx', () => {
  it('releases forged by a process without the secret, named after the honest reader, are refused; the honest pull completes every block', async () => {
    const { path, store, ready, state } = await servingSource();
    const prefill = await ucxPrefill(store, path, cleanups);
    const reader = prefill.ranks[0]!;
    const source = { workerId: 'decode-0', incarnation: ready.incarnation!, epoch: ready.epoch! };

    // The reader's reads stay in flight while it holds its pins, as the forged releases arrive.
    reader.agent.faults.delayCompletions('forever');
    const pulling = reader.endpoint.pull({
      hint: hintFor(source, BLOCKS),
      destinationBlocks: Uint32Array.from({ length: BLOCKS }, (_, i) => i),
    });
    cleanups.push(() => reader.agent.faults.clear());
    await vi.waitFor(() => expect(reader.endpoint.ledger.counts().posted).toBeGreaterThan(0), {
      timeout: 60_000,
      interval: 10,
    });
    expect((await state()).map((rank) => rank.pinsHeld)).toEqual([1, 1]);
    await intrude(reader.agent.name, ready, 'release', 3);
    // Each source rank counted the 3 sent to it; nothing else was refused, and its pin is still held.
    await vi.waitFor(
      async () =>
        expect(await state()).toEqual([
          { pinsHeld: 1, refused: { ...noRefusals, unauthenticated: 3 } },
          { pinsHeld: 1, refused: { ...noRefusals, unauthenticated: 3 } },
        ]),
      { timeout: 60_000, interval: 50 },
    );
    reader.agent.faults.clear();
    expect(await pulling).toMatchObject({
      requested: BLOCKS,
      blocks: BLOCKS,
      checkedBlocks: BLOCKS,
      recomputed: { reasons: [] },
    });
    await reader.endpoint.pinsReleased();
    expect(reader.endpoint.refusedPinMessages).toEqual(noRefusals);
    expect((await state()).map((rank) => rank.pinsHeld)).toEqual([0, 0]);
  }, 180_000);

  it('renewals spoofed by a process without the secret do not keep a killed reader’s pin past its lease', async () => {
    const { path, ready, state } = await servingSource();
    const reader = startChild<{ event: 'pinned'; agent: string }>(
      'test/process/ucx-pinning-reader.ts',
      [path, ready.incarnation!, String(ready.epoch)],
      cleanups,
    );
    const { agent: readerName } = await reader.next('pinned');
    expect((await state()).map((rank) => rank.pinsHeld)).toEqual([1, 1]);
    reader.child.kill('SIGKILL');
    const { leaseTtlMs } = defaultSettings.discovery;
    // One millisecond before the lease ends, the intruder renews: a renewal taken would carry the pin
    // through the next millisecond.
    expect((await state(leaseTtlMs - 1)).map((rank) => rank.pinsHeld)).toEqual([1, 1]);
    await intrude(readerName, ready, 'renew', 3);
    await vi.waitFor(
      async () =>
        expect((await state()).map((rank) => rank.refused)).toEqual([
          { ...noRefusals, unauthenticated: 3 },
          { ...noRefusals, unauthenticated: 3 },
        ]),
      { timeout: 60_000, interval: 50 },
    );
    expect((await state(1)).map((rank) => rank.pinsHeld)).toEqual([0, 0]);
  }, 180_000);
});
