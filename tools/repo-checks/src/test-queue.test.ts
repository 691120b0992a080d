// scripts/test-queue.mjs: the order and the pace of the test phase of `npm test`.
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { longestProjects, runQueue, startOrder } from '../../../scripts/test-queue.mjs';
import { testProjects } from '../../../scripts/test-totals.mjs';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

/** A run whose end the test decides: `end(status)` resolves it. */
function heldRun(): { promise: Promise<number>; end: (status: number) => void } {
  let end!: (status: number) => void;
  const promise = new Promise<number>((resolve) => (end = resolve));
  return { promise, end };
}

describe('startOrder', () => {
  it('starts the longest projects first, in the list’s order, then the others as given', () => {
    expect(startOrder(['a', 'long-2', 'b', 'long-1', 'c'], ['long-1', 'long-2', 'absent'])).toEqual([
      'long-1',
      'long-2',
      'a',
      'b',
      'c',
    ]);
  });

  it('names only projects that exist, each once', () => {
    const projects = testProjects(repoRoot).map((folder) => basename(folder));
    expect(longestProjects.filter((project) => !projects.includes(project))).toEqual([]);
    expect(new Set(longestProjects).size).toBe(longestProjects.length);
  });
});

describe('runQueue', () => {
  it('runs at most `concurrency` projects at a time, the next one starting as soon as one ends, and resolves to every exit status', async () => {
    const runs = new Map<string, ReturnType<typeof heldRun>>();
    const started: string[] = [];
    const queue = runQueue(['a', 'b', 'c', 'd'], 2, (project) => {
      started.push(project);
      const run = heldRun();
      runs.set(project, run);
      return run.promise;
    });
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    await settle();
    expect(started).toEqual(['a', 'b']);
    runs.get('b')!.end(1);
    await settle();
    expect(started).toEqual(['a', 'b', 'c']);
    runs.get('a')!.end(0);
    await settle();
    expect(started).toEqual(['a', 'b', 'c', 'd']);
    runs.get('d')!.end(0);
    runs.get('c')!.end(2);
    expect(await queue).toEqual([
      { project: 'a', exitCode: 0 },
      { project: 'b', exitCode: 1 },
      { project: 'c', exitCode: 2 },
      { project: 'd', exitCode: 0 },
    ]);
  });

  it('runs everything when there are fewer projects than slots, and nothing for no project', async () => {
    expect(await runQueue(['a'], 2, async () => 0)).toEqual([{ project: 'a', exitCode: 0 }]);
    expect(await runQueue([], 2, async () => 0)).toEqual([]);
  });
});
