// The commands that need UCX (demo on its ucx backend, bench, bench link) on a machine where the native library or
// its ucx backend is missing: the library lookup is pointed (with
// --transport-library) at a file that is not there, at a file that is not a library, and at a real
// library built without UCX.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, runBinary } from './binary.js';

const scratch = mkdtempSync(join(tmpdir(), 'kvreuse-cli-no-ucx-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const absent = join(scratch, 'absent', 'libkvreuse_transport.so');
const notALibrary = join(scratch, 'not-a-library.so');
const loopbackOnlyBuild = join(scratch, 'loopback-only');
const loopbackOnly = join(loopbackOnlyBuild, 'libkvreuse_transport.so');
const missingLibrary = `${absent}: no such file, so no native library to load (transport.library from argv --transport-library) [INPUT_FILE]`;
const hint =
  'get it with the repository install script (npm run demo installs libucx-dev, npm run bench also ucx-utils, then each builds the library) or by hand: sudo apt-get install -y libucx-dev ucx-utils && make -C native [TRANSPORT_UNAVAILABLE]';

beforeAll(() => {
  writeFileSync(notALibrary, 'not an ELF file\n');
  const make = spawnSync(
    'make',
    ['-s', '-C', join(repoRoot, 'native'), `BUILD=${loopbackOnlyBuild}`, 'HAVE_UCX=0', loopbackOnly],
    { encoding: 'utf8' },
  );
  if (make.status !== 0) throw new Error(`building the library without UCX failed: ${make.stderr}`);
}, 300_000);

describe.each([
  ['demo', ['demo'], scratch],
  ['bench', ['bench'], repoRoot],
  ['bench link', ['bench', 'link', '--connect', '127.0.0.1:1'], scratch],
])('kvreuse %s without UCX', (command, args, cwd) => {
  it('a transport.library that is not there: one line naming the file and the setting, exit 2, nothing run', async () => {
    const run = await runBinary([...args, '--transport-library', absent], { cwd });
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([`kvreuse: ${missingLibrary}`]);
  });

  it('a library that does not load: one line naming it and why', async () => {
    const run = await runBinary([...args, '--transport-library', notALibrary], { cwd });
    expect(run).toMatchObject({ status: 1, stdout: '' });
    expect(run.stderrLines).toHaveLength(1);
    expect(run.stderrLines[0]).toMatch(
      new RegExp(
        `^kvreuse: ${command} needs the ucx transport: the native library ${JSON.stringify(notALibrary)} does not load \\(.+\\); `,
      ),
    );
    expect(run.stderrLines[0]).toContain(hint);
  });

  it('a library built without UCX: one line saying why it has no ucx backend', async () => {
    const run = await runBinary([...args, '--transport-library', loopbackOnly], { cwd });
    expect(run).toMatchObject({ status: 1, stdout: '' });
    expect(run.stderrLines).toEqual([
      `kvreuse: ${command} needs the ucx transport: the native library ${JSON.stringify(loopbackOnly)} has no ucx backend here (loopback only: UCX headers (<ucp/api/ucp.h>) were not found at build time); ${hint}`,
    ]);
  });

  it('--verbose adds the stack and the lookup error under it', async () => {
    const run = await runBinary([...args, '--transport-library', absent, '--verbose'], { cwd });
    expect(run.status).toBe(2);
    expect(run.stderrLines[0]).toBe(`kvreuse: ${missingLibrary}`);
    // The message once, then where it was thrown.
    expect(run.stderrLines.filter((line) => line.includes('no native library to load'))).toHaveLength(1);
    expect(run.stderrLines[1]).toMatch(/^ {4}at /);
    expect(run.stderrLines).toContainEqual(
      expect.stringMatching(/^caused by: LibraryNotFoundError: libkvreuse_transport not found/),
    );
    expect(run.stderrLines).toContainEqual(expect.stringMatching(/^ {4}at /));
  });
});

describe('kvreuse demo --backend loopback', () => {
  it('does not ask for UCX: a missing library is reported as the missing library', async () => {
    const run = await runBinary(['demo', '--backend', 'loopback', '--transport-library', absent], { cwd: scratch });
    expect(run.status).toBe(2);
    expect(run.stderrLines).toEqual([`kvreuse: ${missingLibrary}`]);
  });
});
