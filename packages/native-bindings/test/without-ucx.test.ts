// The library on a machine without UCX: it does not link UCX but loads libucp.so.0 when the ucx backend
// is first used, so where that cannot be loaded the loopback backend still moves bytes and the ucx
// backend is refused, naming the library. The child runs in a mount namespace of its own (unshare -m)
// in which /dev/null is bind-mounted over the libucp.so.0 the dynamic loader finds: a real failed load,
// nothing stubbed. Needs root (mount; skipped with a message without it, and failing under CI) and UCX
// installed, as the other ucx tests do.
import { execFileSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { inCi, ucxTestsRun } from './support/backends.js';
import { spawnScript } from './support/child.js';

/** The file the dynamic loader opens for libucp.so.0, from its cache (`ldconfig -p`). */
function installedLibucp(): string {
  const line = execFileSync('ldconfig', ['-p'], { encoding: 'utf8' })
    .split('\n')
    .find(
      (entry) =>
        entry.trim().startsWith('libucp.so.0 ') && entry.includes(process.arch === 'x64' ? 'x86-64' : 'AArch64'),
    );
  const path = line?.split(' => ')[1]?.trim();
  if (path === undefined)
    throw new Error('libucp.so.0 is not in the dynamic loader cache (ldconfig -p): install UCX (libucx0)');
  return realpathSync(path);
}

const isRoot = process.getuid?.() === 0;
if (!isRoot && !inCi)
  console.warn('native-bindings: not root, so the test without libucp.so.0 (a bind mount) is SKIPPED');

describe.runIf(ucxTestsRun && (isRoot || inCi))('a process in which libucp.so.0 cannot be loaded', () => {
  it('moves bytes on the loopback backend and refuses the ucx backend with NOT_SUPPORTED naming libucp.so.0', async () => {
    const hidden = installedLibucp();
    const child = spawnScript('test/without-ucx/probe.ts', {
      launcher: ['unshare', '--mount', 'sh', '-c', 'mount --bind /dev/null "$0" && exec "$@"', hidden],
      env: { CI: undefined }, // the child's missing ucx backend is the point, not a CI failure to announce
    });
    const report = await child.next<Record<string, unknown>>('report');
    expect(await child.exited).toBe(0);
    expect(report).toEqual({
      event: 'report',
      backends: ['loopback'],
      bytesDone: 1 << 20,
      mismatchAt: -1,
      ucx: {
        code: 'NOT_SUPPORTED',
        call: 'kvt_agent_create_begin',
        detail: expect.stringMatching(
          /^kvt_agent_create: the ucx backend cannot run here: UCX's libucp\.so\.0 could not be loaded \(.*libucp\.so\.0.*\)/,
        ),
      },
    });
  });
});
