import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  InvalidSettingError,
  type InvalidSetting,
  type ResolveOptions as ResolveSettingsOptions,
  SettingsFileError,
  UnknownSettingError,
} from '@kvreuse/config';
import { afterAll, describe, expect, it } from 'vitest';
import {
  routerFixture,
  routerFixtureArgv,
  routerFixtureEnv,
  routerFixtureJson,
  routerFixtureYaml,
} from '../../test/router-fixture.js';
import {
  defaultSettings,
  resolveSettings,
  safeResolveSettings,
  settingDescriptions,
  type SettingPath,
} from './all-settings.js';
import { exampleSettingsPath } from './example.js';

const directory = mkdtempSync(join(tmpdir(), 'kvreuse-settings-resolve-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const file = join(directory, name);
  writeFileSync(file, text);
  return file;
}

const DEFAULTS = {
  router: {
    enableDecodeToPrefillReuse: false,
    enableDecodeToPrefillGpuReuse: false,
    minimumEstimatedTtftSavingMs: 5,
    minimumTransferPrefixBlocks: 4,
    transferSourceEstimatedBlockUs: 100,
    transferSourceGpuEstimatedBlockUs: 40,
    transferSourceLookupBudgetMs: 2,
    transferSourcePrefillTokenUs: 50,
    maxConcurrentPullsPerSource: 4,
  },
  transport: {
    backend: 'ucx',
    library: '',
    ucxNetDevices: '',
    ucxTransports: '',
    operationTimeoutMs: 1000,
    abandonTimeoutMs: 5000,
    heartbeatIntervalMs: 500,
    heartbeatMisses: 3,
    shutdownDeadlineMs: 10_000,
  },
  discovery: {
    backend: 'sqlite',
    sqlitePath: 'kvreuse-discovery.sqlite',
    sqliteFileMode: '0600',
    etcdEndpoints: ['http://127.0.0.1:2379'],
    etcdCaFile: '',
    etcdCertFile: '',
    etcdKeyFile: '',
    etcdUsername: '',
    etcdPasswordFile: '',
    secretFile: '',
    leaseTtlMs: 10_000,
  },
  frontend: { rejectMediaStatusCode: 415 },
  drain: { failedLoadPolicy: 'recompute' },
  endpoint: { verify: 'full', metricsPort: 0, metricsHost: '127.0.0.1' },
  inventory: { hashSeed: '' },
  profile: { name: '', file: '' },
};

function invalidOf(options: ResolveSettingsOptions): readonly InvalidSetting[] {
  const result = safeResolveSettings(options);
  if (result.success) throw new Error('expected resolution to fail');
  expect(result.error).toBeInstanceOf(InvalidSettingError);
  expect(result.error.code).toBe('INVALID_SETTING');
  return (result.error as InvalidSettingError).invalid;
}

describe('resolveSettings: defaults', () => {
  it('resolves nothing given to the declared defaults, every value from the default', () => {
    const { settings, provenance } = resolveSettings();
    expect(settings).toEqual(DEFAULTS);
    expect(defaultSettings).toEqual(DEFAULTS);
    for (const group of Object.values(provenance)) {
      for (const from of Object.values(group)) expect(from).toEqual({ source: 'default' });
    }
  });

  it('never reads process.env: with a sentinel in every declared variable, no env gives exactly the defaults', () => {
    const saved = { ...process.env };
    try {
      for (const setting of settingDescriptions) process.env[setting.env] = 'sentinel-not-a-valid-value';
      process.env['KVREUSE_FRONTEND_REJECT_MEDIA_STATUS_CODE'] = '599';
      process.env['KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_REUSE'] = 'true';
      process.env['KVREUSE_SENTINEL_UNKNOWN_VARIABLE'] = '1';
      for (const options of [
        {},
        { argv: [] },
        { file: { data: {} } },
        { env: undefined },
      ] satisfies ResolveSettingsOptions[]) {
        const { settings } = resolveSettings(options);
        expect(settings).toEqual(DEFAULTS);
        expect(settings.frontend.rejectMediaStatusCode).toBe(415);
      }
      // The same variables do apply when the caller passes the environment.
      expect(() => resolveSettings({ env: process.env })).toThrow(UnknownSettingError);
    } finally {
      for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
      Object.assign(process.env, saved);
    }
  });
});

describe('resolveSettings: the router fixture through every source', () => {
  const cases: [string, () => ResolveSettingsOptions, object][] = [
    [
      'a YAML file',
      () => ({ file: write('router.yaml', routerFixtureYaml) }),
      { source: 'file', path: join(directory, 'router.yaml') },
    ],
    [
      'a JSON file',
      () => ({ file: write('router.json', routerFixtureJson) }),
      { source: 'file', path: join(directory, 'router.json') },
    ],
    [
      'YAML text',
      () => ({ file: { text: routerFixtureYaml, origin: 'fixture' } }),
      { source: 'file', path: 'fixture' },
    ],
    ['env', () => ({ env: routerFixtureEnv }), { source: 'env' }],
    ['argv', () => ({ argv: routerFixtureArgv }), { source: 'argv' }],
  ];

  it.each(cases)('arrives unchanged from %s', (_name, options, provenance) => {
    const { settings, provenance: from } = resolveSettings(options());
    expect(settings.router).toEqual(routerFixture);
    expect({ ...settings, router: DEFAULTS.router }).toEqual(DEFAULTS);
    for (const value of Object.values(from.router)) expect(value).toMatchObject(provenance);
  });

  it('names the variable and the flag each value came from', () => {
    expect(resolveSettings({ env: routerFixtureEnv }).provenance.router.minimumTransferPrefixBlocks).toEqual({
      source: 'env',
      variable: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS',
    });
    expect(resolveSettings({ argv: routerFixtureArgv }).provenance.router.transferSourceLookupBudgetMs).toEqual({
      source: 'argv',
      flag: '--router-transfer-source-lookup-budget-ms',
    });
  });
});

describe('resolveSettings: precedence', () => {
  it('takes default < file < env < argv, per setting', () => {
    const file = {
      data: {
        transport: { operation_timeout_ms: 1500, abandon_timeout_ms: 6000 },
        discovery: { backend: 'memory', lease_ttl_ms: 3000 },
      },
      origin: 'ops.yaml',
    };
    const env = { KVREUSE_TRANSPORT_OPERATION_TIMEOUT_MS: '2000', KVREUSE_DISCOVERY_LEASE_TTL_MS: '4000' };
    const argv = ['--discovery-lease-ttl-ms=5000'];
    const { settings, provenance } = resolveSettings({ file, env, argv });
    expect(settings.transport).toEqual({
      backend: 'ucx',
      library: '',
      ucxNetDevices: '',
      ucxTransports: '',
      operationTimeoutMs: 2000,
      abandonTimeoutMs: 6000,
      heartbeatIntervalMs: 500,
      heartbeatMisses: 3,
      shutdownDeadlineMs: 10_000,
    });
    expect(settings.discovery).toMatchObject({ backend: 'memory', leaseTtlMs: 5000 });
    expect(provenance.transport).toEqual({
      backend: { source: 'default' },
      library: { source: 'default' },
      ucxNetDevices: { source: 'default' },
      ucxTransports: { source: 'default' },
      operationTimeoutMs: { source: 'env', variable: 'KVREUSE_TRANSPORT_OPERATION_TIMEOUT_MS' },
      abandonTimeoutMs: { source: 'file', path: 'ops.yaml' },
      heartbeatIntervalMs: { source: 'default' },
      heartbeatMisses: { source: 'default' },
      shutdownDeadlineMs: { source: 'default' },
    });
    expect(provenance.discovery.backend).toEqual({ source: 'file', path: 'ops.yaml' });
    expect(provenance.discovery.leaseTtlMs).toEqual({ source: 'argv', flag: '--discovery-lease-ttl-ms' });
  });

  it('lets --no- flags turn off what the file turned on', () => {
    const { settings, provenance } = resolveSettings({
      file: { data: { router: { enable_decode_to_prefill_reuse: true } } },
      argv: ['--no-router-enable-decode-to-prefill-reuse'],
    });
    expect(settings.router.enableDecodeToPrefillReuse).toBe(false);
    expect(provenance.router.enableDecodeToPrefillReuse).toEqual({
      source: 'argv',
      flag: '--no-router-enable-decode-to-prefill-reuse',
    });
  });

  it('reads lists from env and argv comma-separated', () => {
    const env = { KVREUSE_DISCOVERY_ETCD_ENDPOINTS: 'http://10.0.0.1:2379, https://etcd-2.internal:2379' };
    expect(resolveSettings({ env }).settings.discovery.etcdEndpoints).toEqual([
      'http://10.0.0.1:2379',
      'https://etcd-2.internal:2379',
    ]);
    const argv = ['--discovery-etcd-endpoints', 'http://[::1]:2379'];
    expect(resolveSettings({ argv }).settings.discovery.etcdEndpoints).toEqual(['http://[::1]:2379']);
  });

  it('returns frozen settings and provenance', () => {
    const { settings, provenance } = resolveSettings({ argv: ['--discovery-etcd-endpoints=http://a:1'] });
    expect(Object.isFrozen(settings)).toBe(true);
    expect(Object.isFrozen(settings.router)).toBe(true);
    expect(Object.isFrozen(settings.discovery.etcdEndpoints)).toBe(true);
    expect(Object.isFrozen(provenance.router)).toBe(true);
    expect(Object.isFrozen(defaultSettings.discovery.etcdEndpoints)).toBe(true);
  });
});

describe('resolveSettings: unknown names', () => {
  it('fails with one UnknownSettingError listing every unknown name of every source with the closest known name', () => {
    const result = safeResolveSettings({
      file: { text: 'routr:\n  x: 1\nrouter:\n  minimum_transfer_prefix_block: 3\n', origin: 'k.yaml' },
      env: {
        HOME: '/root',
        KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOKS: '1',
        KVREUSE_TRANSPORT_BACKEND: 'carrier-pigeon',
      },
      argv: ['--transport-bakend=ucx', 'serve', '--router-minimum-transfer-prefix-blocks', '0'],
    });
    if (result.success) throw new Error('expected resolution to fail');
    const error = result.error as UnknownSettingError;
    expect(error).toBeInstanceOf(UnknownSettingError);
    expect(error.code).toBe('UNKNOWN_SETTING');
    expect(error.unknown).toEqual([
      { name: 'routr', source: { source: 'file', path: 'k.yaml', line: 1 }, foreignGroup: 'routr', closest: 'router' },
      {
        name: 'router.minimum_transfer_prefix_block',
        source: { source: 'file', path: 'k.yaml', line: 4 },
        closest: 'router.minimum_transfer_prefix_blocks',
      },
      {
        name: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOKS',
        source: { source: 'env', variable: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOKS' },
        closest: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS',
      },
      {
        name: '--transport-bakend',
        source: { source: 'argv', flag: '--transport-bakend' },
        closest: '--transport-backend',
      },
      { name: 'serve', source: { source: 'argv', flag: 'serve' } },
    ]);
    expect(error.message).toContain(
      'routr in file k.yaml:1 (group routr is not composed by this process; did you mean router?)',
    );
    expect(error.message).toContain(
      'router.minimum_transfer_prefix_block in file k.yaml:4 (did you mean router.minimum_transfer_prefix_blocks?)',
    );
    expect(error.message).toContain('--transport-bakend in argv (did you mean --transport-backend?)');
    expect(error.message).toContain('serve in argv (not a setting flag)');
  });
});

describe("resolveSettings: unknown variables under unknownEnv: 'warn'", () => {
  it('leaves them out and lists them with the closest name; every other unknown name is still refused', () => {
    const env = {
      KVREUSE_FUZZ_SEED: '7',
      KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOKS: '1',
      KVREUSE_TRANSPORT_BACKEND: 'loopback',
    };
    const { settings, unknownEnv } = resolveSettings({ env, unknownEnv: 'warn' });
    expect(settings.transport.backend).toBe('loopback');
    expect(unknownEnv).toEqual([
      { name: 'KVREUSE_FUZZ_SEED', source: { source: 'env', variable: 'KVREUSE_FUZZ_SEED' }, foreignGroup: 'fuzz' },
      {
        name: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOKS',
        source: { source: 'env', variable: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOKS' },
        closest: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS',
      },
    ]);
    expect(Object.isFrozen(unknownEnv)).toBe(true);
    expect(() => resolveSettings({ env, unknownEnv: 'error' })).toThrow(UnknownSettingError);
    expect(() => resolveSettings({ env, argv: ['--router-nope', '1'], unknownEnv: 'warn' })).toThrow(
      expect.objectContaining({ unknown: [expect.objectContaining({ name: '--router-nope' })] }),
    );
  });

  it('a policy it does not know is refused as an option', () => {
    expect(() => resolveSettings({ unknownEnv: 'ignore' } as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_RESOLVE_OPTIONS' }),
    );
  });
});

describe('resolveSettings: invalid values', () => {
  const badValues: [SettingPath, unknown, string][] = [
    ['router.enableDecodeToPrefillReuse', 'yes', 'true | false'],
    ['router.enableDecodeToPrefillGpuReuse', 1, 'true | false'],
    ['router.minimumEstimatedTtftSavingMs', -1, 'number ≥ 0'],
    ['router.minimumTransferPrefixBlocks', 0, 'integer ≥ 1'],
    ['router.minimumTransferPrefixBlocks', 2.5, 'integer ≥ 1'],
    ['router.transferSourceEstimatedBlockUs', 0, 'number > 0'],
    ['router.transferSourceGpuEstimatedBlockUs', -3, 'number > 0'],
    ['router.transferSourceLookupBudgetMs', -0.5, 'number ≥ 0'],
    ['router.transferSourcePrefillTokenUs', '50', 'number > 0'],
    ['transport.backend', 'tcp', 'one of ucx | loopback'],
    ['transport.operationTimeoutMs', 0, 'integer > 0'],
    ['transport.abandonTimeoutMs', 4999.5, 'integer > 0'],
    ['transport.shutdownDeadlineMs', null, 'integer > 0'],
    ['transport.heartbeatIntervalMs', 9, 'integer 10–60000'],
    ['transport.heartbeatIntervalMs', 60_001, 'integer 10–60000'],
    ['transport.heartbeatMisses', 0, 'integer 1–1000'],
    ['transport.heartbeatMisses', 2.5, 'integer 1–1000'],
    ['discovery.backend', 'redis', 'one of memory | sqlite | etcd'],
    ['discovery.sqlitePath', '', 'non-empty string'],
    ['discovery.etcdEndpoints', [], 'list (at least 1) of http://host:port or https://host:port'],
    ['discovery.etcdEndpoints', ['127.0.0.1:2379'], 'list (at least 1) of http://host:port or https://host:port'],
    ['discovery.etcdEndpoints', ['http://a:70000'], 'list (at least 1) of http://host:port or https://host:port'],
    ['discovery.leaseTtlMs', 1500, 'integer 1000–9000000000000, a multiple of 1000'],
    ['discovery.leaseTtlMs', 0, 'integer 1000–9000000000000, a multiple of 1000'],
    ['frontend.rejectMediaStatusCode', 200, 'integer 400–599'],
    ['frontend.rejectMediaStatusCode', 600, 'integer 400–599'],
    ['drain.failedLoadPolicy', 'retry', 'one of fail | recompute'],
    ['inventory.hashSeed', 'qwen3 main', 'up to 128 printable ASCII characters'],
    ['profile.name', 'Qwen3 0.6B', 'a profile name, or empty'],
  ];

  it.each(badValues)('refuses %s = %j from a file, naming setting, source, value and rule', (path, value, rule) => {
    const setting = settingDescriptions.find((candidate) => candidate.path === path);
    if (setting === undefined) throw new Error(path);
    const invalid = invalidOf({ file: { data: { [setting.group]: { [setting.key]: value } }, origin: 'bad.yaml' } });
    expect(invalid).toHaveLength(1);
    expect(invalid[0]).toMatchObject({
      setting: path,
      name: setting.fileKey,
      value,
      source: { source: 'file', path: 'bad.yaml' },
      rule,
      related: [],
    });
    expect(invalid[0]?.reason).not.toBe('');
  });

  it('says when an env or argv string cannot be read as the type, keeping the string as the value', () => {
    const invalid = invalidOf({
      env: { KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS: 'four' },
      argv: ['--router-enable-decode-to-prefill-reuse=yes', '--discovery-etcd-endpoints=http://a:1,,http://b:2'],
    });
    expect(invalid.map(({ setting, value, source, reason }) => [setting, value, source, reason])).toEqual([
      [
        'router.minimumTransferPrefixBlocks',
        'four',
        { source: 'env', variable: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS' },
        'cannot read "four" as a number (booleans are true|false|1|0, numbers decimal, lists comma-separated)',
      ],
      [
        'router.enableDecodeToPrefillReuse',
        'yes',
        { source: 'argv', flag: '--router-enable-decode-to-prefill-reuse' },
        'cannot read "yes" as a boolean (booleans are true|false|1|0, numbers decimal, lists comma-separated)',
      ],
      [
        'discovery.etcdEndpoints',
        'http://a:1,,http://b:2',
        { source: 'argv', flag: '--discovery-etcd-endpoints' },
        'item 1: expected http://host:port or https://host:port',
      ],
    ]);
  });

  it('collects every invalid value of every source, even one a later source overrides', () => {
    const invalid = invalidOf({
      file: {
        data: { router: { minimum_transfer_prefix_blocks: 0 }, frontend: { reject_media_status_code: 302 } },
        origin: 'f.yaml',
      },
      env: { KVREUSE_TRANSPORT_BACKEND: 'tcp' },
      argv: ['--router-minimum-transfer-prefix-blocks=8', '--drain-failed-load-policy', 'retry'],
    });
    expect(invalid.map(({ setting, source }) => [setting, source.source])).toEqual([
      ['router.minimumTransferPrefixBlocks', 'file'],
      ['frontend.rejectMediaStatusCode', 'file'],
      ['transport.backend', 'env'],
      ['drain.failedLoadPolicy', 'argv'],
    ]);
  });

  it('reports unknown names first, without the invalid values', () => {
    expect(() => resolveSettings({ env: { KVREUSE_NOPE: '1', KVREUSE_TRANSPORT_BACKEND: 'tcp' } })).toThrow(
      UnknownSettingError,
    );
  });

  it('reports a file that is not a mapping of sections as SettingsFileError', () => {
    const result = safeResolveSettings({ file: { text: '- router\n', origin: 'list.yaml' } });
    expect(result.success).toBe(false);
    if (!result.success) {
      expect(result.error).toBeInstanceOf(SettingsFileError);
      expect(result.error.code).toBe('SETTINGS_FILE');
    }
  });
});

describe('resolveSettings: rules between settings', () => {
  it('refuses GPU reuse without reuse, naming both values and where they came from', () => {
    const invalid = invalidOf({ env: { KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_GPU_REUSE: 'true' } });
    expect(invalid).toEqual([
      {
        setting: 'router.enableDecodeToPrefillGpuReuse',
        name: 'KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_GPU_REUSE',
        value: true,
        source: { source: 'env', variable: 'KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_GPU_REUSE' },
        rule: 'router.enable_decode_to_prefill_gpu_reuse requires router.enable_decode_to_prefill_reuse',
        reason: 'the merged values break the rule',
        related: [
          {
            setting: 'router.enableDecodeToPrefillReuse',
            name: 'router.enable_decode_to_prefill_reuse',
            value: false,
            source: { source: 'default' },
          },
        ],
      },
    ]);
    const both = ['--router-enable-decode-to-prefill-reuse', '--router-enable-decode-to-prefill-gpu-reuse'];
    expect(resolveSettings({ argv: both }).settings.router.enableDecodeToPrefillGpuReuse).toBe(true);
  });

  it('checks the rules after merging: a later source can break or mend them', () => {
    const file = {
      data: { router: { enable_decode_to_prefill_reuse: true, enable_decode_to_prefill_gpu_reuse: true } },
    };
    expect(resolveSettings({ file }).settings.router.enableDecodeToPrefillGpuReuse).toBe(true);
    expect(invalidOf({ file, argv: ['--no-router-enable-decode-to-prefill-reuse'] })[0]?.related[0]).toEqual({
      setting: 'router.enableDecodeToPrefillReuse',
      name: '--no-router-enable-decode-to-prefill-reuse',
      value: false,
      source: { source: 'argv', flag: '--no-router-enable-decode-to-prefill-reuse' },
    });
  });

  it('needs the abandon timeout at least twice the operation timeout', () => {
    expect(
      resolveSettings({ argv: ['--transport-operation-timeout-ms=2500'] }).settings.transport.abandonTimeoutMs,
    ).toBe(5000);
    const [issue] = invalidOf({ argv: ['--transport-operation-timeout-ms=2501'] });
    expect(issue).toMatchObject({
      setting: 'transport.abandonTimeoutMs',
      value: 5000,
      source: { source: 'default' },
      rule: 'transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms',
      related: [
        {
          setting: 'transport.operationTimeoutMs',
          value: 2501,
          source: { source: 'argv', flag: '--transport-operation-timeout-ms' },
        },
      ],
    });
  });

  it('needs the shutdown deadline at least the abandon timeout', () => {
    const [issue] = invalidOf({ env: { KVREUSE_TRANSPORT_SHUTDOWN_DEADLINE_MS: '4000' } });
    expect(issue).toMatchObject({
      setting: 'transport.shutdownDeadlineMs',
      value: 4000,
      rule: 'transport.shutdown_deadline_ms ≥ transport.abandon_timeout_ms',
      related: [{ setting: 'transport.abandonTimeoutMs', value: 5000 }],
    });
  });

  it('declares one deployment profile at most: a name or a file', () => {
    expect(resolveSettings({ argv: ['--profile-name=qwen3-0.6b-bf16-b64'] }).settings.profile).toEqual({
      name: 'qwen3-0.6b-bf16-b64',
      file: '',
    });
    const [issue] = invalidOf({
      argv: ['--profile-name=qwen3-0.6b-bf16-b64'],
      env: { KVREUSE_PROFILE_FILE: 'deploy/qwen.json' },
    });
    expect(issue).toMatchObject({
      setting: 'profile.file',
      value: 'deploy/qwen.json',
      rule: 'profile.file and profile.name are not both set',
      related: [
        { setting: 'profile.name', value: 'qwen3-0.6b-bf16-b64', source: { source: 'argv', flag: '--profile-name' } },
      ],
    });
  });

  it('reports every broken rule together with the invalid values, skipping rules over an invalid value', () => {
    const invalid = invalidOf({
      argv: [
        '--router-enable-decode-to-prefill-gpu-reuse',
        '--transport-operation-timeout-ms=9000',
        '--transport-abandon-timeout-ms=-1',
      ],
    });
    expect(invalid.map(({ setting, rule }) => [setting, rule])).toEqual([
      ['transport.abandonTimeoutMs', 'integer > 0'],
      [
        'router.enableDecodeToPrefillGpuReuse',
        'router.enable_decode_to_prefill_gpu_reuse requires router.enable_decode_to_prefill_reuse',
      ],
    ]);
  });
});

describe('safeResolveSettings and the example file', () => {
  it('returns the resolution as data on success', () => {
    const result = safeResolveSettings({ file: exampleSettingsPath });
    expect(result.success).toBe(true);
    if (result.success) {
      expect(result.data.settings.router.enableDecodeToPrefillReuse).toBe(true);
      // The example file says it on line 7.
      expect(result.data.provenance.router.enableDecodeToPrefillReuse).toEqual({
        source: 'file',
        path: exampleSettingsPath,
        line: 7,
      });
    }
  });

  it('rethrows what is not a settings error', () => {
    expect(() => safeResolveSettings({ argv: 5 as never })).toThrow(TypeError);
    expect(() => safeResolveSettings({ argv: ['--transport-backend', 5] as never })).toThrow(
      /argv must be an array of strings/,
    );
    expect(() => safeResolveSettings({ env: 'KVREUSE_X=1' as never })).toThrow(/env must be an object/);
    expect(() => resolveSettings({ env: 'KVREUSE_X=1' as never })).toThrow(
      expect.objectContaining({
        code: 'INVALID_RESOLVE_OPTIONS',
        option: 'env',
        value: 'KVREUSE_X=1',
        message: expect.stringContaining('got "KVREUSE_X=1"'),
      }),
    );
  });
});
