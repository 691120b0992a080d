import { describe, expect, it } from 'vitest';
import { ucxTestsRun } from './support/backends.js';
import { spawnScript } from './support/child.js';
import { allZero } from './support/pair.js';
import { QWEN3_PREFIX_BYTES, QWEN3_PREFIX_PIECES } from './support/qwen3.js';

const live = (counters: Record<string, unknown>) =>
  Object.fromEntries(Object.keys(allZero).map((key) => [key, counters[key]]));

describe.runIf(ucxTestsRun)('two processes on ucx', () => {
  it(
    'B reads A’s 42-block Qwen3-0.6B prefix as 2,352 × 128 KiB descriptors, with every guard holding',
    async () => {
      const seed = 0x5eed;
      const source = spawnScript('test/cross-process/source.ts', { args: [`proof-source-${process.pid}`, String(seed)] });
      const reader = spawnScript('test/cross-process/reader.ts', { args: [`proof-reader-${process.pid}`, String(seed)] });
      try {
        const published = await source.next<{ metadata: string; region: number; bytes: number }>('ready');
        expect(published.bytes).toBe(QWEN3_PREFIX_BYTES);
        reader.send(published);
        const done = await reader.next<
          Record<string, Record<string, unknown>> & { mismatch: number; descriptors: number; advertised: unknown; path: string }
        >('done');
        expect(done.advertised).toEqual([{ id: published.region, bytes: QWEN3_PREFIX_BYTES, kind: 'dram' }]);
        // Between two processes of one machine, UCX's shared-memory lanes, not tcp.
        expect(done.path).toMatch(/(sysv|posix)\/memory/);
        expect(done.descriptors).toBe(QWEN3_PREFIX_PIECES);
        expect(done.result).toEqual({ bytesDone: QWEN3_PREFIX_BYTES });
        expect(done.mismatch).toBe(-1);
        expect(done.bytesMoved).toBe(QWEN3_PREFIX_BYTES);

        expect(done.outOfBounds).toMatchObject({
          local: { code: 'INVALID_PARAM', call: 'kvt_xfer_post' },
          remote: { code: 'INVALID_PARAM', call: 'kvt_xfer_post' },
          untouched: true,
          bytesMoved: 0,
        });
        expect(done.whileInFlight).toMatchObject({
          state: 'in-progress',
          deregister: { code: 'BUSY', call: 'kvt_mem_deregister' },
          release: { code: 'BUSY' },
          destroy: { code: 'BUSY', call: 'kvt_agent_destroy' },
        });

        expect(live(done.counters ?? {})).toEqual(allZero);

        const notified = await source.next<{ sender: string; data: string }>('notified');
        expect(notified).toMatchObject({ sender: `proof-reader-${process.pid}`, data: `prefix read by proof-reader-${process.pid}` });
        source.send({ command: 'close' });
        const closed = await source.next<{ counters: Record<string, unknown> }>('closed');
        expect(live(closed.counters)).toEqual(allZero);
        expect(await reader.exited).toBe(0);
        expect(await source.exited).toBe(0);
      } finally {
        source.process.kill();
        reader.process.kill();
      }
    },
    120_000,
  );
});
