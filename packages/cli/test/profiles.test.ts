import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtInProfile, builtInProfileNames } from '@kvreuse/profile-admission';
import { kvreuseSettings } from '../src/settings/all-settings.js';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot, runInProcess } from './binary.js';

const decodeWorker = join(repoRoot, 'tools/demo/examples/qwen3-0.6b-decode-tp2.json');
const prefillWorker = join(repoRoot, 'tools/demo/examples/qwen3-0.6b-prefill-tp1.json');
const dir = mkdtempSync(join(tmpdir(), 'kvreuse-cli-profiles-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('kvreuse profiles list and show', () => {
  it('list: every built-in profile, one a line', async () => {
    const run = await runInProcess(['profiles', 'list']);
    expect(run.status).toBe(0);
    expect(
      run.stdout
        .trimEnd()
        .split('\n')
        .map((line) => line.split(' ')[0]),
    ).toEqual([...builtInProfileNames]);
    expect(run.stdout).toMatch(
      /^qwen3-0\.6b-bf16-b64 +v3 +Qwen\/Qwen3-0\.6B +prefill TP 1 PP 1 \(dram, vram\), decode TP 2 PP 1 \(dram, vram\)$/m,
    );
  });

  it('list --json', async () => {
    const run = await runInProcess(['profiles', 'list', '--json']);
    expect((JSON.parse(run.stdout) as { name: string }[]).map((profile) => profile.name)).toEqual([
      ...builtInProfileNames,
    ]);
  });

  it('show: a built-in profile in full', async () => {
    const run = await runInProcess(['profiles', 'show', 'llama-3.1-70b-bf16-b64']);
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual(
      JSON.parse(JSON.stringify(builtInProfile('llama-3.1-70b-bf16-b64', { settings: kvreuseSettings }))),
    );
  });

  it('show: a file that is not a profile: one line naming the problem, exit 2', async () => {
    const path = join(dir, 'not-a-profile.json');
    writeFileSync(path, '{"name": "x"}');
    const run = await runInProcess(['profiles', 'show', path]);
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([expect.stringMatching(/^kvreuse: .*\[INVALID_PROFILE\]$/)]);
  });

  it('show or check of a name no profile has, and no file has: the closest built-in name, exit 2', async () => {
    for (const command of ['show', 'check']) {
      const run = await runInProcess(['profiles', command, 'qwen3-0.6b'], { cwd: dir });
      expect(run).toMatchObject({ status: 2, stdout: '' });
      expect(run.stderrLines).toEqual([
        expect.stringMatching(
          /^kvreuse: no built-in deployment profile is named "qwen3-0\.6b" \(did you mean qwen3-0\.6b-bf16-b64\?\); the built-in profiles are .* \[UNKNOWN_PROFILE\]$/,
        ),
      ]);
    }
  });

  it('show without a name is a usage error', async () => {
    const run = await runInProcess(['profiles', 'show']);
    expect(run.status).toBe(2);
    expect(run.stderrLines).toEqual([
      expect.stringMatching(/^kvreuse: profiles show: name a profile: one of qwen3-0\.6b-bf16-b64, .* \[USAGE\]$/),
    ]);
  });
});

describe('kvreuse profiles check', () => {
  it('admits the Qwen3-0.6B profile against the example decode TP 2 and prefill TP 1 workers', async () => {
    const run = await runInProcess([
      'profiles',
      'check',
      'qwen3-0.6b-bf16-b64',
      '--worker',
      decodeWorker,
      '--worker',
      prefillWorker,
    ]);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(
      /^admitted: profile qwen3-0\.6b-bf16-b64 v3 against workers qwen3-0\.6b-decode-0, qwen3-0\.6b-prefill-0, native .*\n$/,
    );
  });

  it.each([
    ['qwen3-0.6b-bf16-b64', 3],
    ['llama-3.1-8b-bf16-b64', 2],
  ])('admits the built-in %s with default settings (no settings file, variable or flag)', async (name, version) => {
    const run = await runInProcess(['profiles', 'check', name]);
    expect(run).toMatchObject({ status: 0, stderr: '' });
    expect(run.stdout).toMatch(
      new RegExp(`^admitted: profile ${name.replaceAll('.', '\\.')} v${version} against no worker`),
    );
  });

  it('the profile the settings declare (profile.name) is the one checked', async () => {
    const run = await runInProcess(['profiles', 'check', '--worker', decodeWorker, '--json'], {
      env: { KVREUSE_PROFILE_NAME: 'qwen3-0.6b-bf16-b64' },
    });
    expect(run.status).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({
      profile: 'qwen3-0.6b-bf16-b64',
      admitted: true,
      reasons: [],
      workers: ['qwen3-0.6b-decode-0'],
    });
  });

  it('a profile.file the settings declare by a relative path: taken from the command’s working directory', async () => {
    const profile = builtInProfile('qwen3-0.6b-bf16-b64', { settings: kvreuseSettings });
    writeFileSync(join(dir, 'declared.json'), JSON.stringify(profile));
    const run = await runInProcess(
      ['profiles', 'check', '--worker', decodeWorker, '--json', '--profile-file', 'declared.json'],
      { cwd: dir },
    );
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toMatchObject({ profile: 'qwen3-0.6b-bf16-b64', admitted: true });
  });

  it('refuses with every reason on stdout, one line on stderr, exit 1', async () => {
    const run = await runInProcess([
      'profiles',
      'check',
      'llama-3.1-8b-bf16-b64',
      '--worker',
      decodeWorker,
      '--inventory-hash-seed',
      'Qwen/Qwen3-0.6B',
    ]);
    expect(run.status).toBe(1);
    const [verdict, ...reasons] = run.stdout.trimEnd().split('\n');
    expect(verdict).toMatch(/^refused: profile llama-3\.1-8b-bf16-b64 v2 against workers qwen3-0\.6b-decode-0/);
    expect(reasons).toContain(
      '  - blockHash.seed: expected "", actual "Qwen/Qwen3-0.6B" (set by --inventory-hash-seed, KVREUSE_INVENTORY_HASH_SEED or inventory.hash_seed)',
    );
    expect(reasons).toContainEqual(
      expect.stringMatching(/^  - worker qwen3-0\.6b-decode-0: geometry\.numLayers: expected 32, actual 28/),
    );
    expect(run.stderrLines).toEqual([
      `kvreuse: profile llama-3.1-8b-bf16-b64 refuses these facts (${reasons.length} reasons) [ADMISSION_REFUSED]`,
    ]);
  });

  it('a native library that is not where transport.library says: one line naming the file and the setting, exit 2', async () => {
    const run = await runInProcess([
      'profiles',
      'check',
      'qwen3-0.6b-bf16-b64',
      '--transport-library',
      join(dir, 'libnone.so'),
    ]);
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      `kvreuse: ${join(dir, 'libnone.so')}: no such file, so no native library to load (transport.library from argv --transport-library) [INPUT_FILE]`,
    ]);
  });

  it('without a profile named or declared: usage error, exit 2', async () => {
    const run = await runInProcess(['profiles', 'check', '--worker', decodeWorker]);
    expect(run.status).toBe(2);
    expect(run.stderrLines).toEqual([
      'kvreuse: profiles check: no profile: name one, or declare one with --profile-name or --profile-file (see kvreuse profiles check --help) [USAGE]',
    ]);
  });

  it('a worker file that is not JSON, or not a complete worker: one line naming the file, exit 2', async () => {
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, '[{');
    const notJson = await runInProcess(['profiles', 'check', 'qwen3-0.6b-bf16-b64', '--worker', broken]);
    expect(notJson.status).toBe(2);
    expect(notJson.stderrLines).toEqual([
      expect.stringMatching(new RegExp(`^kvreuse: ${broken}: cannot read a worker's rank parts: .*\\[INPUT_FILE\\]$`)),
    ]);

    const half = join(dir, 'half.json');
    writeFileSync(half, JSON.stringify([(JSON.parse(readFileSync(decodeWorker, 'utf8')) as unknown[])[1]]));
    const incomplete = await runInProcess(['profiles', 'check', 'qwen3-0.6b-bf16-b64', '--worker', half]);
    expect(incomplete.status).toBe(2);
    expect(incomplete.stderrLines).toEqual([
      `kvreuse: ${half}: the rank parts do not make a complete worker: missing ranks (tp 0, pp 0) [INPUT_FILE]`,
    ]);
  });

  it('a worker file that is missing or a directory: one line naming the file, --worker and why in words, exit 2', async () => {
    const refusal = async (path: string): Promise<readonly string[]> => {
      const run = await runInProcess(['profiles', 'check', 'qwen3-0.6b-bf16-b64', '--worker', path]);
      expect(run.status).toBe(2);
      expect(run.stdout).toBe('');
      return run.stderrLines;
    };
    const missing = join(dir, 'missing.json');
    expect(await refusal(missing)).toEqual([
      `kvreuse: ${missing}: cannot read a worker's rank parts: no such file (--worker) [INPUT_FILE]`,
    ]);
    expect(await refusal(dir)).toEqual([
      `kvreuse: ${dir}: cannot read a worker's rank parts: a directory, not a file (--worker) [INPUT_FILE]`,
    ]);
  });

  it('a --worker-id that cannot name a worker: usage error naming it, before any discovery is opened', async () => {
    const refusal = async (id: string): Promise<readonly string[]> => {
      const run = await runInProcess(['profiles', 'check', 'qwen3-0.6b-bf16-b64', '--worker-id', id], { cwd: dir });
      expect(run).toMatchObject({ status: 2, stdout: '' });
      return run.stderrLines;
    };
    expect(await refusal('')).toEqual([
      'kvreuse: profiles check: --worker-id needs a value, not an empty one: --worker-id <id> (see kvreuse profiles check --help) [USAGE]',
    ]);
    expect(await refusal('decode/0')).toEqual([
      'kvreuse: profiles check: --worker-id must be 1–200 characters of letters, digits and ._:@- (it becomes a discovery key segment), not "decode/0" (see kvreuse profiles check --help) [USAGE]',
    ]);
  });
});
