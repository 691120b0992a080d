import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { runInProcess } from './binary.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-cli-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const settingsFile = file(
  'kvreuse.yaml',
  'router:\n  enable_decode_to_prefill_reuse: true\n  minimum_transfer_prefix_blocks: 4\ntransport:\n  backend: loopback\n',
);

describe('kvreuse config show', () => {
  it('names where every value came from: the file line, the variable, the flag, the default', async () => {
    const run = await runInProcess(['config', 'show', '--config', settingsFile, '--transport-backend', 'ucx'], {
      env: { KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS: '8' },
    });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines).toContainEqual(
      expect.stringMatching(new RegExp(`^router\\.enable_decode_to_prefill_reuse +true +file ${settingsFile}:2$`)),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^router\.minimum_transfer_prefix_blocks +8 +env KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS$/,
      ),
    );
    expect(lines).toContainEqual(expect.stringMatching(/^transport\.backend +ucx +argv --transport-backend$/));
    expect(lines).toContainEqual(expect.stringMatching(/^discovery\.backend +sqlite +the default$/));
  });

  it('--json gives the settings and their provenance', async () => {
    const run = await runInProcess(['config', 'show', '--json', `--config=${settingsFile}`]);
    expect(run.status).toBe(0);
    const shown = JSON.parse(run.stdout) as {
      settings: { router: { minimumTransferPrefixBlocks: number } };
      provenance: { router: Record<string, unknown>; drain: Record<string, unknown> };
    };
    expect(shown.settings.router.minimumTransferPrefixBlocks).toBe(4);
    expect(shown.provenance.router['minimumTransferPrefixBlocks']).toEqual({
      source: 'file',
      path: settingsFile,
      line: 3,
    });
    expect(Object.values(shown.provenance.drain).every((from) => JSON.stringify(from) === '{"source":"default"}')).toBe(
      true,
    );
  });

  it('-o yaml gives the same document as --json, as YAML; --json with -o yaml is a usage error', async () => {
    const [json, yaml, both] = await Promise.all([
      runInProcess(['config', 'show', '--json', '--transport-backend', 'loopback']),
      runInProcess(['config', 'show', '-o', 'yaml', '--transport-backend', 'loopback']),
      runInProcess(['config', 'show', '--json', '-o', 'yaml']),
    ]);
    expect([json.status, yaml.status]).toEqual([0, 0]);
    expect(parse(yaml.stdout)).toEqual(JSON.parse(json.stdout));
    expect(both).toMatchObject({ status: 2, stdout: '' });
    expect(both.stderrLines).toEqual([
      'kvreuse: config show: --json and -o yaml ask for different outputs; give one (see kvreuse config show --help) [USAGE]',
    ]);
  });

  it('an unknown setting flag: one line with the closest name, exit 2, nothing on stdout', async () => {
    const run = await runInProcess(['config', 'show', '--router-minimum-transfer-prefix-block', '3']);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderrLines).toEqual([
      'kvreuse: 1 unknown setting name(s): --router-minimum-transfer-prefix-block in argv (did you mean --router-minimum-transfer-prefix-blocks?) [UNKNOWN_SETTING]',
    ]);
  });

  it('an unknown KVREUSE_* variable is named in a warning with the closest name, and the command runs; --strict refuses it', async () => {
    const env = { KVREUSE_ROUTER_NOPE: '1', KVREUSE_FUZZ_SEED: '7', KVREUSE_TRANSPORT_BACKEND: 'loopback' };
    const [warned, strict] = await Promise.all([
      runInProcess(['config', 'show'], { env }),
      runInProcess(['config', 'show', '--strict'], { env }),
    ]);
    expect(warned.status).toBe(0);
    expect(warned.stdout).toMatch(/^transport\.backend +loopback +env KVREUSE_TRANSPORT_BACKEND$/m);
    expect(warned.stderrLines).toEqual([
      'kvreuse: warning: 2 unknown KVREUSE_* variable(s) ignored (--strict refuses them):',
      expect.stringMatching(/^ {2}- KVREUSE_ROUTER_NOPE in env \(did you mean KVREUSE_ROUTER_\w+\?\)$/),
      '  - KVREUSE_FUZZ_SEED in env (group fuzz is not composed by this process)',
    ]);
    expect(strict).toMatchObject({ status: 2, stdout: '' });
    expect(strict.stderrLines).toEqual([
      'kvreuse: 2 unknown setting name(s): [UNKNOWN_SETTING]',
      expect.stringMatching(/^ {2}- KVREUSE_ROUTER_NOPE in env /),
      '  - KVREUSE_FUZZ_SEED in env (group fuzz is not composed by this process)',
    ]);
  });

  it('one settings-file lookup, shown first: --config, else KVREUSE_CONFIG, else ./kvreuse.yaml, else none', async () => {
    const other = file('other.yaml', 'transport:\n  backend: loopback\n');
    const [option, variable, local, none] = await Promise.all([
      runInProcess(['config', 'show', '--config', other], { cwd: dir, env: { KVREUSE_CONFIG: settingsFile } }),
      runInProcess(['config', 'show'], { cwd: dir, env: { KVREUSE_CONFIG: 'other.yaml' } }),
      runInProcess(['config', 'show', '-o', 'json'], { cwd: dir }),
      runInProcess(['config', 'show']),
    ]);
    expect(option.stdout.split('\n')[0]).toBe(`settings file: ${other} (--config)`);
    expect(variable.stdout.split('\n')[0]).toBe(`settings file: ${other} (KVREUSE_CONFIG)`);
    expect(variable.stdout).toMatch(new RegExp(`^transport\\.backend +loopback +file ${other}:2$`, 'm'));
    expect(variable.stderr).toBe('');
    expect((JSON.parse(local.stdout) as { file: unknown }).file).toEqual({ path: settingsFile, from: 'cwd' });
    expect(none.stdout.split('\n')[0]).toBe('settings file: none (no --config, KVREUSE_CONFIG or ./kvreuse.yaml)');
  });

  it('a JSON settings file is read as JSON: a trailing comma, which YAML would take, is refused, exit 2', async () => {
    const comma = file('comma.json', '{"router": {"minimum_transfer_prefix_blocks": 4,},}');
    const run = await runInProcess(['config', 'show', '--config', comma]);
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      `kvreuse: settings file ${comma}: not valid JSON: Expected double-quoted property name in JSON at line 1, column 49: [SETTINGS_FILE]`,
      '{"router": {"minimum_transfer_prefix_blocks": 4,},}',
      `${' '.repeat(48)}^`,
    ]);
  });

  it.each([
    ['notaurl', 'expected http://host:port or https://host:port'],
    ['http://127.0.0.1:0', 'port must be from 1 to 65535'],
    ['http://127.0.0.1:99999', 'port must be from 1 to 65535'],
  ])('--discovery-etcd-endpoints %s: one problem naming the flag, exit 2', async (endpoint, problem) => {
    const run = await runInProcess(['config', 'show', '--discovery-etcd-endpoints', endpoint]);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderrLines).toEqual([
      `kvreuse: 1 invalid setting(s): --discovery-etcd-endpoints = ${JSON.stringify(endpoint)} in argv: item 0: ${problem} (rule: list (at least 1) of http://host:port or https://host:port) [INVALID_SETTING]`,
    ]);
  });

  it('a settings file that is missing, a directory, or below a file is named in words, not by its errno', async () => {
    const refusal = async (path: string): Promise<readonly string[]> => {
      const run = await runInProcess(['config', 'show', '--config', path]);
      expect(run.status).toBe(2);
      return run.stderrLines;
    };
    const missing = join(dir, 'missing.yaml');
    const below = join(settingsFile, 'k.yaml');
    expect(await refusal(missing)).toEqual([
      `kvreuse: settings file ${missing}: cannot be read: no such file [SETTINGS_FILE]`,
    ]);
    expect(await refusal(dir)).toEqual([
      `kvreuse: settings file ${dir}: cannot be read: a directory, not a file [SETTINGS_FILE]`,
    ]);
    expect(await refusal(below)).toEqual([
      `kvreuse: settings file ${below}: cannot be read: a folder in its path is a file [SETTINGS_FILE]`,
    ]);
  });

  it('a missing file: one line naming the file, exit 2', async () => {
    const run = await runInProcess(['config', 'show', '--config', join(dir, 'missing.yaml')]);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderrLines).toEqual([
      expect.stringMatching(/^kvreuse: settings file .*missing\.yaml: .*\[SETTINGS_FILE\]$/),
    ]);
  });

  it.each([
    [
      'malformed YAML',
      file('broken.yaml', 'router:\n  minimum_transfer_prefix_blocks: [4\n'),
      /^kvreuse: settings file .*broken\.yaml: not valid YAML: .* at line 3, column 1: \[SETTINGS_FILE\]$/,
      '  minimum_transfer_prefix_blocks: [4',
    ],
    [
      'malformed JSON',
      file('broken.json', '{"router": {"minimum_transfer_prefix_blocks": 4'),
      /^kvreuse: settings file .*broken\.json: not valid JSON: .* at line 1, column 48: \[SETTINGS_FILE\]$/,
      '{"router": {"minimum_transfer_prefix_blocks": 4',
    ],
  ])(
    '%s: the file and where, then the code frame as the parser drew it, exit 2',
    async (_case, path, headline, source) => {
      const run = await runInProcess(['config', 'show', '--config', path]);
      expect(run.status).toBe(2);
      expect(run.stdout).toBe('');
      const [first, ...frame] = run.stderr.split('\n');
      expect(first).toMatch(headline);
      expect(frame).toContain(source);
      expect(frame.filter((line) => /^ *\^$/.test(line))).toHaveLength(1);
    },
  );

  it('--config without its file is a usage error', async () => {
    const run = await runInProcess(['config', 'show', '--config']);
    expect(run.status).toBe(2);
    expect(run.stderrLines).toEqual([
      'kvreuse: config show: --config needs a value: --config <file> (see kvreuse config show --help) [USAGE]',
    ]);
  });
});

describe('kvreuse config validate', () => {
  it('a valid file, environment and flags: says so, exit 0', async () => {
    const run = await runInProcess(['config', 'validate', '--config', settingsFile]);
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(`valid: ${settingsFile}, the environment and the flags\n`);
  });

  it('prints every problem of every source on stdout, one per line, and each only there: one line on stderr; exit 2', async () => {
    const bad = file('bad.yaml', 'router:\n  minimum_transfer_prefix_blocks: 0\ntransport:\n  backend: tcp\n');
    const run = await runInProcess(['config', 'validate', '--config', bad, '--discovery-lease-ttl-ms', '1500']);
    expect(run.status).toBe(2);
    expect(run.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^router\\.minimum_transfer_prefix_blocks = 0 in file ${bad}:2: `)),
      expect.stringMatching(new RegExp(`^transport\\.backend = "tcp" in file ${bad}:4: `)),
      expect.stringMatching(/^--discovery-lease-ttl-ms = "1500" in argv: /),
    ]);
    expect(run.stderrLines).toEqual([
      'kvreuse: the settings are not valid: 3 problems, each listed on stdout [SETTINGS_NOT_VALID]',
    ]);
  });

  it('--json: the verdict, the code and the problems', async () => {
    const run = await runInProcess(['config', 'validate', '--json', '--transport-bakend', 'ucx']);
    expect(run.status).toBe(2);
    expect(JSON.parse(run.stdout)).toEqual({
      valid: false,
      code: 'UNKNOWN_SETTING',
      problems: ['--transport-bakend in argv (did you mean --transport-backend?)'],
    });
  });
});

describe('kvreuse config schema', () => {
  it('prints the JSON Schema of a settings file', async () => {
    const run = await runInProcess(['config', 'schema']);
    expect(run.status).toBe(0);
    const schema = JSON.parse(run.stdout) as { $schema: string; properties: Record<string, unknown> };
    expect(schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(Object.keys(schema.properties).sort()).toEqual([
      'discovery',
      'drain',
      'endpoint',
      'frontend',
      'inventory',
      'profile',
      'router',
      'transport',
    ]);
  });
});
