// pullPrefix across processes on ucx: two source ranks (TP 2), each its own child process serving
// registered banks of deterministic bytes, pulled into this process's one destination rank (TP 1).
// The pins are a test-only fake (test/fake-pins.ts) carrying the checksums the children computed.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { RankPart } from '@kvreuse/descriptors';
import { afterEach, describe, expect, it } from 'vitest';
import { fakePin } from '../test/fake-pins.js';
import { openDestination, transport } from '../test/loopback-pull.js';
import { PINNED_BLOCKS, ucxPull } from '../test/process/ucx-pull.js';
import { pullPrefix } from './pull.js';

// Like drain's process tests: skipped where UCX is not built, except under CI, which requires it.
const inCi = !['', '0', 'false', undefined].includes(process.env['CI']);
const ucxTestsRun = inCi || transport.capabilities().backends.includes('ucx');
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

interface Ready {
  readonly metadata: string;
  readonly regionIds: number[];
  readonly checksums: Record<string, number[]>;
}

/** Starts source rank `rank` and resolves with its first line (rejects with its stderr if it exits first). */
function startSource(name: string, rank: number): Promise<Ready> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--conditions=@kvreuse/source', 'test/process/ucx-source-rank.ts', name, String(rank)],
    {
      cwd: packageDir,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', (line) => resolve(JSON.parse(line) as Ready));
    child.once('exit', (code) =>
      reject(new Error(`source rank ${rank} exited (${code}) before it was ready: ${stderr}`)),
    );
  });
}

describe.skipIf(!ucxTestsRun)('pullPrefix on ucx across processes', () => {
  it('pulls and verifies three blocks from two source rank processes into one destination rank (TP 2 → 1)', async () => {
    const { destinationWorker, template } = ucxPull();
    const names = [0, 1].map((rank) => `pull-ucx-source-${rank}-${process.pid}`);
    const ready = await Promise.all(names.map((name, rank) => startSource(name, rank)));
    const destination = await openDestination(
      template,
      destinationWorker.ranks[0] as RankPart,
      'ucx',
      ready.map(({ metadata, regionIds }, rank) => ({
        name: names[rank]!,
        metadata: Buffer.from(metadata, 'base64'),
        regionIds,
      })),
    );
    try {
      const pins = template.pairs.map((route, pair) =>
        fakePin({
          pinId: `pin-${pair}`,
          rank: route.sourceRank,
          sourceBlocks: PINNED_BLOCKS,
          checksums: Uint32Array.from(ready[template.pairSourceRank[pair]!]!.checksums[pair]!),
        }),
      );
      const receipt = await pullPrefix({
        ledger: destination.ledger,
        pairs: destination.pairs,
        pins,
        destinationBlocks: Uint32Array.of(0, 1, 2),
        verify: 'full',
        policy: 'fail',
        link: { linkClass: 'same-host', tier: 'host' },
      });
      const bytes = 3 * Number(template.blockBytes);
      expect(receipt).toMatchObject({
        requested: 3,
        blocks: 3,
        bytes,
        bytesMoved: bytes,
        checkedBlocks: 3,
        recomputed: { blocks: 0, reasons: [] },
      });
      expect(pins.map((pin) => pin.releases)).toEqual([1, 1]);
    } finally {
      await destination.close();
    }
  }, 120_000);
});
