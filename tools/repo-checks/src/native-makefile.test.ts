// native/Makefile's dependency tracking, run on a copy of native/ (without its build folder): what a header change
// makes out of date. Header times are set past the targets' own, so the outcome does not hang on the clock.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const mappingObject = 'build/obj-ucx0/release/services/mapping.o';
const statusObject = 'build/obj-ucx0/release/services/status.o';
const fakeCudaDriver = 'build/fake_cuda/libcuda.so.1';
const testProgram = 'build/obj-ucx0/plain/test/test_stretch';

describe('native/Makefile', () => {
  const copies: string[] = [];
  afterEach(() => {
    for (const copy of copies.splice(0)) rmSync(copy, { recursive: true, force: true });
  });

  function copyOfNative(): string {
    const root = mkdtempSync(join(tmpdir(), 'native-makefile-'));
    copies.push(root);
    cpSync(join(repoRoot, 'native'), root, {
      recursive: true,
      filter: (source) => !source.startsWith(join(repoRoot, 'native/build')),
    });
    return root;
  }

  function make(root: string, ...args: string[]) {
    return spawnSync('make', ['--no-print-directory', '-C', root, 'HAVE_UCX=0', ...args], { encoding: 'utf8' });
  }

  function build(root: string, ...targets: string[]): void {
    const run = make(root, ...targets);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  }

  /** Whether `target` is out of date (make -q: 1 when it would be remade). */
  function outOfDate(root: string, target: string): boolean {
    const run = make(root, '-q', target);
    expect(run.status === 0 || run.status === 1, run.stderr).toBe(true);
    return run.status === 1;
  }

  /** Dates `header` a minute after `target` was made. */
  function changeAfter(root: string, header: string, target: string): void {
    const later = new Date(statSync(join(root, target)).mtimeMs + 60_000);
    utimesSync(join(root, header), later, later);
  }

  it('rebuilds the objects that include a changed header, and no other', () => {
    const root = copyOfNative();
    build(root, mappingObject, statusObject);
    changeAfter(root, 'src/services/mapping.h', mappingObject);
    expect(outOfDate(root, mappingObject)).toBe(true);
    expect(outOfDate(root, statusObject)).toBe(false);
  }, 60_000);

  it('rebuilds the fake CUDA driver when a header its headers include changes', () => {
    const root = copyOfNative();
    build(root, fakeCudaDriver);
    changeAfter(root, 'include/kvreuse_transport.h', fakeCudaDriver);
    expect(outOfDate(root, fakeCudaDriver)).toBe(true);
  }, 60_000);

  it('remakes nothing right after a test program and its harness are built', () => {
    const root = copyOfNative();
    build(root, '-j2', testProgram);
    expect(outOfDate(root, testProgram)).toBe(false);
  }, 180_000);

  it('rebuilds an object whose dependency file is missing', () => {
    const root = copyOfNative();
    build(root, mappingObject);
    rmSync(join(root, `${mappingObject}.d`), { force: true });
    expect(outOfDate(root, mappingObject)).toBe(true);
  }, 60_000);

  // The test files of several packages build the fake driver while the native tests load it: a file written in
  // place would be found half written ("file too short").
  it('writes what tests load under a private name and renames it into place', () => {
    const root = copyOfNative();
    const loaded = [fakeCudaDriver, 'build/fake_cuda/old/libcuda.so.1', 'build/fake_cuda/kernels_on_host.o'];
    for (const target of [...loaded, 'build/libkvreuse_transport.so']) {
      const run = make(root, '-n', '-B', target);
      expect(run.status, run.stderr).toBe(0);
      const commands = run.stdout.replace(/\\\n/g, ' ').split('\n');
      const writing = commands.filter((command) => command.includes(` -o ${target}`));
      expect(writing, target).toHaveLength(1);
      expect(writing[0], target).toContain(` -o ${target}.$$.tmp `);
      expect(writing[0], target).toContain(`mv -f ${target}.$$.tmp ${target} `);
    }
  }, 60_000);

  it('removes the dependency files with the rest of the build on clean', () => {
    const root = copyOfNative();
    build(root, mappingObject);
    build(root, 'clean');
    expect(() => statSync(join(root, 'build'))).toThrow();
  }, 60_000);
});
