// A full /dev/shm through the facade: a typed error naming the size and /dev/shm, and an agent that goes
// on working. The child runs in its own mount and IPC namespace (made with `unshare`, as root) with a
// 24 MiB tmpfs over /dev/shm and SysV shared memory limited to 8 MiB.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { inCi, ucxTestsRun } from './support/backends.js';
import { spawnScript } from './support/child.js';

const SMALL_SHM =
  'mount -t tmpfs -o size=24m tmpfs /dev/shm && echo 8388608 > /proc/sys/kernel/shmmax && exec "$0" "$@"';
const namespacesAllowed = spawnSync('unshare', ['--mount', '--ipc', 'true']).status === 0;
if (!namespacesAllowed && !inCi)
  console.warn(
    'native-bindings: unshare --mount --ipc is not permitted here (needs root); the small /dev/shm test is SKIPPED',
  );

describe.runIf(ucxTestsRun && (namespacesAllowed || inCi))('allocating with /dev/shm full', () => {
  it('refuses with NO_MEMORY naming the size and /dev/shm, leaves nothing allocated, and allocates what fits', async () => {
    const child = spawnScript('test/small-shm/allocate.ts', {
      launcher: ['unshare', '--mount', '--ipc', 'sh', '-c', SMALL_SHM],
    });
    const report = await child.next<Record<string, unknown>>('report');
    expect(report).toMatchObject({
      refusal: { name: 'NativeTransportError', code: 'NO_MEMORY' },
      afterRefusal: { liveAllocations: 0, allocatedBytes: 0 },
      fitsAllocated: true,
    });
    expect((report['refusal'] as { message: string }).message).toMatch(
      /no shared memory for 67108864 bytes: .*\/dev\/shm has \d+ bytes free/,
    );
    expect(await child.exited).toBe(0);
  }, 60_000);
});
