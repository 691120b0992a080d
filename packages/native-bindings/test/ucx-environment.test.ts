// UCX inside Node as users run it: the facade's UCX defaults (src/ucx-defaults.ts) are in effect in a
// process that loads the library, and a user's own settings win (src/ucx-defaults.test.ts covers the
// precedence for every setting). A process with UCX's memory hooks switched back on is not run here:
// that is the configuration that now and then crashes inside malloc (the reason for the defaults), so
// such a test could only pass by chance. test/startup/stress.ts runs it by hand (--env ...).
import { describe, expect, it } from 'vitest';
import { ucxTestsRun } from './support/backends.js';
import { spawnScript } from './support/child.js';

const UNSET = { UCX_MEM_MALLOC_HOOKS: undefined, UCX_MEM_MMAP_HOOK_MODE: undefined, UCX_HANDLE_ERRORS: undefined };

describe.runIf(ucxTestsRun)('UCX settings of a Node process that loaded the library', () => {
  it('leaves libc unpatched and WebAssembly bounds checks to V8 by default', async () => {
    const child = spawnScript('test/ucx-environment/probe.ts', { env: UNSET });
    expect(await child.next('report')).toEqual({
      event: 'report',
      settings: { UCX_MEM_MALLOC_HOOKS: 'no', UCX_MEM_MMAP_HOOK_MODE: 'none', UCX_HANDLE_ERRORS: 'none' },
      mmapPatched: false,
      outOfBounds: 'RuntimeError: memory access out of bounds',
    });
    expect(await child.exited).toBe(0);
  });

  it('keeps the settings the user made: UCX’s error handler asked for takes SIGSEGV from V8', async () => {
    const child = spawnScript('test/ucx-environment/probe.ts', { env: { ...UNSET, UCX_HANDLE_ERRORS: 'bt' } });
    await expect(child.next('report')).rejects.toThrow(/exited with null before sending "report"/);
    expect(child.stderr()).toMatch(/Caught signal 11/);
  });
});
