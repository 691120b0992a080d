import { describe, expect, it } from 'vitest';
import { allSampleGroups } from '../test/sample-groups.js';
import { thrown } from '../test/thrown.js';
import { compose } from './composition.js';
import { SettingsFileError } from './errors.js';
import { readArgv as readArgvOf, readEnv as readEnvOf, readFile as readFileOf } from './sources.js';
import type { LoadedSettingsFile } from './settings-file.js';

const every = compose(allSampleGroups, 'error');
const readArgv = (argv: readonly string[]) => readArgvOf(every, argv);
const readEnv = (env: Readonly<Record<string, string | undefined>>) => readEnvOf(every, env);
const readFile = (file: Pick<LoadedSettingsFile, 'origin' | 'data'>) =>
  readFileOf(every, { ...file, lines: new Map(), numbers: new Map() });

function givenValues(argv: readonly string[]): [string, unknown, boolean][] {
  return readArgv(argv).values.map(({ setting, value, isText }) => [setting.path, value, isText]);
}

describe('readArgv', () => {
  it('takes --flag value and --flag=value, keeping values as text to coerce', () => {
    expect(givenValues(['--transport-backend', 'loopback', '--router-minimum-transfer-prefix-blocks=8'])).toEqual([
      ['transport.backend', 'loopback', true],
      ['router.minimumTransferPrefixBlocks', '8', true],
    ]);
  });

  it('takes bare boolean flags as true and --no- flags as false, never eating the next argument', () => {
    expect(
      givenValues(['--router-enable-decode-to-prefill-reuse', '--no-router-enable-decode-to-prefill-gpu-reuse']),
    ).toEqual([
      ['router.enableDecodeToPrefillReuse', true, false],
      ['router.enableDecodeToPrefillGpuReuse', false, false],
    ]);
    const reading = readArgv(['--router-enable-decode-to-prefill-reuse', 'false']);
    expect(reading.values.map(({ value }) => value)).toEqual([true]);
    expect(reading.unknown).toEqual([{ name: 'false', source: { source: 'argv', flag: 'false' } }]);
    expect(givenValues(['--router-enable-decode-to-prefill-reuse=0'])).toEqual([
      ['router.enableDecodeToPrefillReuse', '0', true],
    ]);
  });

  it('takes a value that starts with a single dash, and an empty value after =', () => {
    expect(givenValues(['--router-minimum-transfer-prefix-blocks', '-1', '--discovery-sqlite-path='])).toEqual([
      ['router.minimumTransferPrefixBlocks', '-1', true],
      ['discovery.sqlitePath', '', true],
    ]);
  });

  it('reports a flag without its value, a valued --no- flag and a flag given twice', () => {
    const reading = readArgv([
      '--transport-backend',
      '--router-minimum-transfer-prefix-blocks',
      '4',
      '--no-router-enable-decode-to-prefill-reuse=true',
      '--router-minimum-transfer-prefix-blocks=5',
      '--frontend-reject-media-status-code',
    ]);
    expect(reading.values.map(({ setting }) => setting.path)).toEqual(['router.minimumTransferPrefixBlocks']);
    expect(reading.invalid.map(({ setting, value, reason }) => [setting, value, reason])).toEqual([
      [
        'transport.backend',
        null,
        '--transport-backend needs a value: --transport-backend <value> or --transport-backend=<value>',
      ],
      ['router.enableDecodeToPrefillReuse', 'true', '--no-router-enable-decode-to-prefill-reuse takes no value'],
      [
        'router.minimumTransferPrefixBlocks',
        '5',
        'given more than once in argv (--router-minimum-transfer-prefix-blocks, then --router-minimum-transfer-prefix-blocks)',
      ],
      [
        'frontend.rejectMediaStatusCode',
        null,
        '--frontend-reject-media-status-code needs a value: --frontend-reject-media-status-code <value> or --frontend-reject-media-status-code=<value>',
      ],
    ]);
  });

  it('reports unknown flags with the closest flag, skipping their value, and arguments that are no flag at all', () => {
    const reading = readArgv(['--transport-bakend', 'ucx', 'serve', '-v', '--no-transport-backend']);
    expect(reading.unknown).toEqual([
      {
        name: '--transport-bakend',
        source: { source: 'argv', flag: '--transport-bakend' },
        closest: '--transport-backend',
      },
      { name: 'serve', source: { source: 'argv', flag: 'serve' } },
      { name: '-v', source: { source: 'argv', flag: '-v' } },
      {
        name: '--no-transport-backend',
        source: { source: 'argv', flag: '--no-transport-backend' },
        closest: '--transport-backend',
      },
    ]);
    expect(reading.values).toEqual([]);
  });
});

describe('suggestions', () => {
  it('come from the group a name names, when that group is composed', () => {
    const closest = [
      readArgv(['--transport-nope']).unknown[0]?.closest,
      readEnv({ KVREUSE_DISCOVERY_NOPE: '1' }).unknown[0]?.closest,
      readFile({ origin: 'k.yaml', data: { drain: { nope: 1 } } }).unknown[0]?.closest,
    ];
    expect(closest).toEqual(['--transport-backend', 'KVREUSE_DISCOVERY_BACKEND', 'drain.failed_load_policy']);
  });
});

describe('readEnv', () => {
  it('never reads KVREUSE_CONFIG, which names the settings file, as a setting', () => {
    expect(readEnv({ KVREUSE_CONFIG: 'kvreuse.yaml' })).toEqual({ values: [], unknown: [], ignored: [], invalid: [] });
  });

  it('reads only KVREUSE_ variables, skips unset ones and reports unknown ones with the closest variable', () => {
    const reading = readEnv({
      PATH: '/usr/bin',
      KVREUSE_TRANSPORT_BACKEND: 'loopback',
      KVREUSE_DISCOVERY_SQLITE_PATH: undefined,
      KVREUSE_TRANSPORT_BAKEND: 'ucx',
    });
    expect(reading.values.map(({ setting, value, isText }) => [setting.path, value, isText])).toEqual([
      ['transport.backend', 'loopback', true],
    ]);
    expect(reading.unknown).toEqual([
      {
        name: 'KVREUSE_TRANSPORT_BAKEND',
        source: { source: 'env', variable: 'KVREUSE_TRANSPORT_BAKEND' },
        closest: 'KVREUSE_TRANSPORT_BACKEND',
      },
    ]);
  });
});

describe('readFile', () => {
  const source = { source: 'file', path: 'k.yaml' };

  it('reads group sections of snake_case keys with typed values', () => {
    const reading = readFile({ origin: 'k.yaml', data: { transport: { operation_timeout_ms: 250 }, router: null } });
    expect(
      reading.values.map(({ setting, value, isText, source: from }) => [setting.path, value, isText, from]),
    ).toEqual([['transport.operationTimeoutMs', 250, false, source]]);
  });

  it('reports unknown sections and keys with the closest name, also for a key outside its section', () => {
    const reading = readFile({
      origin: 'k.yaml',
      data: { routr: { a: 1 }, router: { minimumTransferPrefixBlocks: 3 }, lease_ttl_ms: 2000 },
    });
    expect(reading.unknown).toEqual([
      { name: 'routr', source, foreignGroup: 'routr', closest: 'router' },
      { name: 'router.minimumTransferPrefixBlocks', source, closest: 'router.minimum_transfer_prefix_blocks' },
      { name: 'lease_ttl_ms', source, closest: 'discovery.lease_ttl_ms' },
    ]);
  });

  it('reads no document as no settings, and refuses anything but a mapping of mappings', () => {
    expect(readFile({ origin: 'k.yaml', data: null }).values).toEqual([]);
    expect(() => readFile({ origin: 'k.yaml', data: ['router'] })).toThrow(SettingsFileError);
    expect(() => readFile({ origin: 'k.yaml', data: { router: 5 } })).toThrow(
      /section router must be a mapping of settings, not 5/,
    );
  });

  it('shows a section that is no mapping without the credentials of a URL in it, and cut when long', () => {
    const data = { discovery: 'http://alice:secret@etcd:2379', router: 'x'.repeat(100_000) };
    expect(() => readFile({ origin: 'k.yaml', data: { discovery: data.discovery } })).toThrow(
      new SettingsFileError('k.yaml', 'section discovery must be a mapping of settings, not "http://***@etcd:2379"'),
    );
    const long = thrown(() => readFile({ origin: 'k.yaml', data: { router: data.router } }), SettingsFileError);
    expect(long.message.length).toBeLessThan(1000);
  });
});
