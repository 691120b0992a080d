import { expect } from 'vitest';
import { type ScriptOptions, spawnScript } from './child.js';
import { allZero } from './pair.js';
import { QWEN3_PREFIX_BYTES, QWEN3_PREFIX_PIECES } from './qwen3.js';

const live = (counters: Record<string, unknown>) =>
  Object.fromEntries(Object.keys(allZero).map((key) => [key, counters[key]]));

/** Where and how one side of the proof runs. */
export type ProofSide = Pick<ScriptOptions, 'launcher' | 'env'>;

/**
 * The cross-process proof (test/cross-process/): process A publishes the 42-block Qwen3-0.6B prefix,
 * process B READs it as 2,352 × 128 KiB descriptors and verifies every byte, with every guard holding,
 * B's notification reaches A, and both end with zero live counters. Returns B's endpoint report
 * (`peer.transport()`), for the caller to check the path the bytes took.
 */
export async function provePrefixPull(
  label: string,
  sides: { source?: ProofSide; reader?: ProofSide } = {},
): Promise<string> {
  const seed = 0x5eed;
  const readerName = `${label}-reader-${process.pid}`;
  const source = spawnScript('test/cross-process/source.ts', {
    ...sides.source,
    args: [`${label}-source-${process.pid}`, String(seed)],
  });
  const reader = spawnScript('test/cross-process/reader.ts', { ...sides.reader, args: [readerName, String(seed)] });
  try {
    const published = await source.next<{ metadata: string; region: number; bytes: number }>('ready');
    expect(published.bytes).toBe(QWEN3_PREFIX_BYTES);
    reader.send(published);
    const done = await reader.next<
      Record<string, Record<string, unknown>> & {
        mismatch: number;
        descriptors: number;
        advertised: unknown;
        path: string;
      }
    >('done');
    expect(done.advertised).toEqual([{ id: published.region, bytes: QWEN3_PREFIX_BYTES, kind: 'dram' }]);
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
      destroy: { code: 'BUSY', call: 'kvt_agent_shutdown' },
    });

    expect(live(done.counters ?? {})).toEqual(allZero);

    const notified = await source.next<{ sender: string; data: string }>('notified');
    expect(notified).toMatchObject({ sender: readerName, data: `prefix read by ${readerName}` });
    source.send({ command: 'close' });
    const closed = await source.next<{ counters: Record<string, unknown> }>('closed');
    expect(live(closed.counters)).toEqual(allZero);
    expect(await reader.exited).toBe(0);
    expect(await source.exited).toBe(0);
    return done.path;
  } finally {
    source.process.kill();
    reader.process.kill();
  }
}
