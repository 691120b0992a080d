// The prebuilt libraries of the platform packages (packages/native-linux-<cpu>-gnu, built by their
// `build` scripts before this package): each is an ELF shared object for its cpu that does not link
// UCX (it loads libucp.so.0 at run time), and each runs: a small C program linked against it
// (test/platform-packages/loopback-read.c) reads a mebibyte over loopback and tries a ucx agent,
// natively for this machine's cpu and under qemu-user for the other. Without a cross compiler or qemu
// the run is skipped, loudly, except in CI (scripts/dev.mjs installs both).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { inCi, ucxTestsRun } from './support/backends.js';

const packagesDir = fileURLToPath(new URL('../..', import.meta.url));
const program = fileURLToPath(new URL('platform-packages/loopback-read.c', import.meta.url));
const include = fileURLToPath(new URL('../../../native/include', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'kvreuse-platform-packages-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const platforms = [
  { cpu: 'x64', triplet: 'x86_64-linux-gnu', machine: 'Advanced Micro Devices X86-64', qemu: 'qemu-x86_64' },
  { cpu: 'arm64', triplet: 'aarch64-linux-gnu', machine: 'AArch64', qemu: 'qemu-aarch64' },
] as const;

function commandExists(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

/** readelf's answer for the library: its machine, soname and the libraries it needs. */
function elfOf(library: string): { machine: string | undefined; soname: string | undefined; needed: string[] } {
  const text = execFileSync('readelf', ['--file-header', '--dynamic', library], { encoding: 'utf8' });
  return {
    machine: /^\s*Machine:\s+(.+)$/m.exec(text)?.[1]?.trim(),
    soname: /\(SONAME\)\s+Library soname: \[(.+)\]/.exec(text)?.[1],
    needed: [...text.matchAll(/\(NEEDED\)\s+Shared library: \[(.+)\]/g)].map((match) => match[1] ?? ''),
  };
}

for (const { cpu, triplet, machine, qemu } of platforms) {
  const dir = join(packagesDir, `native-linux-${cpu}-gnu`);
  const library = join(dir, 'libkvreuse_transport.so');
  const native = process.arch === cpu;
  const runnable = commandExists(`${triplet}-gcc`) && (native || commandExists(qemu));
  if (!runnable && !inCi)
    console.warn(`platform-packages: no ${triplet}-gcc or ${qemu}: running the ${cpu} library is SKIPPED`);

  describe(`@kvreuse/native-linux-${cpu}-gnu`, () => {
    it(`holds a ${machine} shared library that does not link UCX`, () => {
      expect(existsSync(library), `${library} (built by the package's build script)`).toBe(true);
      const elf = elfOf(library);
      expect(elf.machine).toBe(machine);
      expect(elf.soname).toBe('libkvreuse_transport.so');
      expect(elf.needed).toContain('libc.so.6');
      expect(elf.needed.filter((name) => /^libuc[pst]\./.test(name))).toEqual([]);
    });

    it.runIf(runnable || inCi)(
      `reads over loopback ${native ? 'natively' : `under ${qemu}`}; a ucx agent ${native && ucxTestsRun ? 'is created' : 'is refused naming libucp.so.0'}`,
      () => {
        const executable = join(work, `loopback-read-${cpu}`);
        execFileSync(`${triplet}-gcc`, [
          '-std=c11',
          '-Wall',
          '-Werror',
          `-I${include}`,
          '-o',
          executable,
          program,
          `-L${dir}`,
          '-l:libkvreuse_transport.so',
        ]);
        const [command, ...args] = native ? [executable] : [qemu, '-L', `/usr/${triplet}`, executable];
        const output = execFileSync(command!, args, {
          encoding: 'utf8',
          env: { ...process.env, LD_LIBRARY_PATH: dir, UCX_MEM_MALLOC_HOOKS: 'no', UCX_MEM_MMAP_HOOK_MODE: 'none' },
        });
        const [read, ucx] = output.trim().split('\n');
        expect(read).toBe(`read ${1 << 20} bytes, 0 differ`);
        if (native && ucxTestsRun) expect(ucx).toBe('ucx: created');
        else
          expect(ucx).toMatch(
            /^ucx: KVT_ERR_NOT_SUPPORTED: kvt_agent_create: the ucx backend cannot run here: UCX's libucp\.so\.0 could not be loaded \(libucp\.so\.0: /,
          );
      },
    );
  });
}
