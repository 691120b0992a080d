import { describe, expect, it } from 'vitest';
import { testedBackends } from './support/backends.js';
import { spawnScript } from './support/child.js';

describe.each(testedBackends)('process lifecycle on %s', (backend) => {
  it('keeps the process alive while an operation is pending, and not once it is idle', async () => {
    const child = spawnScript('test/lifecycle/keep-alive.ts', { args: [backend] });
    await expect(child.next('completed')).resolves.toMatchObject({ bytesDone: 4096 });
    expect(await child.exited).toBe(0);
  }, 60_000);

  it('warns about a handle dropped without being closed, and leaves its native memory alone', async () => {
    const child = spawnScript('test/lifecycle/leak.ts', { args: [backend], nodeFlags: ['--expose-gc'] });
    const warned = await child.next<{ message: string; liveAllocations: number }>('warned');
    expect(warned.message).toMatch(
      /Allocation 0x[0-9a-f]+ \(4096 bytes\) of agent .* was garbage-collected without being closed/,
    );
    expect(warned.liveAllocations).toBe(1);
    expect(await child.exited).toBe(0);
  }, 60_000);

  it.each([
    ['a completed operation dropped without being released, and keeps it', 'operation'],
    ['a dropped operation however the operations delivered around it are released', 'mixed'],
  ])(
    'warns about %s',
    async (_what, mode) => {
      const child = spawnScript('test/lifecycle/leak.ts', { args: [backend, mode], nodeFlags: ['--expose-gc'] });
      const warned = await child.next<{ message: string; liveOperations: number }>('warned');
      expect(warned.message).toMatch(/Operation \d+ of agent .* was garbage-collected without being closed/);
      expect(warned.liveOperations).toBe(1);
      expect(await child.exited).toBe(0);
    },
    60_000,
  );
});
