import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageDir, runBinary, runInProcess } from './binary.js';

const commandNames = [
  'config show',
  'config validate',
  'config schema',
  'profiles list',
  'profiles show',
  'profiles check',
  'inspect',
  'watch',
  'sidecar',
  'bench',
  'bench link',
  'demo',
];

describe('the kvreuse binary', () => {
  it('--help (and no arguments) lists every command, exit 0', async () => {
    for (const args of [['--help'], []]) {
      const run = await runBinary(args);
      expect(run.status).toBe(0);
      expect(run.stderr).toBe('');
      for (const name of commandNames) expect(run.stdout).toMatch(new RegExp(`^  ${name} +\\S`, 'm'));
    }
  });

  it('--version prints the package version', async () => {
    const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version: string };
    const run = await runBinary(['--version']);
    expect(run).toMatchObject({ status: 0, stdout: `${version}\n`, stderr: '' });
  });

  // Each command's help through runCli in this process, as the binary calls it (the binary itself runs in
  // the tests around these): a process each took a second of the suite's CPU for no other line of code.
  it.each(commandNames)('%s --help: usage, options, exit 0', async (name) => {
    const run = await runInProcess([...name.split(' '), '--help']);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^usage: kvreuse ${name}`));
    expect(run.stdout).toContain('  -h, --help\n');
  });

  it.each([
    ['config show', '--router-minimum-transfer-prefix-blocks <value>'],
    ['inspect', '--discovery-etcd-endpoints <value>'],
    ['profiles check', '--profile-file <value>'],
    ['demo', '--transport-backend <value>'],
    ['bench link', '--transport-ucx-transports <value>'],
  ])('%s --help lists the flags of the settings it reads, from the catalog', async (name, flag) => {
    const run = await runInProcess([...name.split(' '), '--help']);
    expect(run.stdout).toContain(`  ${flag}\n`);
  });

  it('a group without its subcommand shows the group help', async () => {
    const run = await runBinary(['profiles']);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^usage: kvreuse profiles <list\|show\|check>/);
  });

  it('an unknown command: one line, exit 2', async () => {
    const run = await runBinary(['inspekt']);
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      'kvreuse: unknown command "inspekt" of kvreuse: expected one of config, profiles, inspect, watch, sidecar, bench, demo (see kvreuse --help) [UNKNOWN_COMMAND]',
    ]);
  });

  it('an unknown subcommand: one line, exit 2', async () => {
    const run = await runBinary(['config', 'dump']);
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      'kvreuse: unknown command "dump" of kvreuse config: expected one of show, validate, schema (see kvreuse config --help) [UNKNOWN_COMMAND]',
    ]);
  });

  it('a user error has no stack trace; --verbose adds it', async () => {
    const quiet = await runBinary(['profiles', 'show', 'no-such-profile.json']);
    expect(quiet.status).toBe(2);
    expect(quiet.stderrLines).toHaveLength(1);
    const verbose = await runBinary(['profiles', 'show', 'no-such-profile.json', '--verbose']);
    expect(verbose.status).toBe(2);
    expect(verbose.stderrLines[0]).toBe(quiet.stderrLines[0]);
    expect(verbose.stderrLines.slice(1)).toContainEqual(expect.stringMatching(/^\s+at /));
  });
});
