import { describe, expect, it } from 'vitest';
import {
  describeInvalidSetting,
  describeProvenance,
  InvalidSettingError,
  isSettingsError,
  ResolveOptionsError,
  SettingsFileError,
  UnknownSettingError,
} from './errors.js';

describe('errors', () => {
  it('carry a stable code and a name', () => {
    const unknown = new UnknownSettingError([
      { name: 'KVREUSE_X', source: { source: 'env', variable: 'KVREUSE_X' }, closest: 'KVREUSE_Y' },
    ]);
    const invalid = new InvalidSettingError([]);
    const file = new SettingsFileError('k.yaml', 'cannot be read');
    expect([unknown.code, invalid.code, file.code]).toEqual(['UNKNOWN_SETTING', 'INVALID_SETTING', 'SETTINGS_FILE']);
    expect([unknown.name, invalid.name, file.name]).toEqual([
      'UnknownSettingError',
      'InvalidSettingError',
      'SettingsFileError',
    ]);
    for (const error of [unknown, invalid, file]) {
      expect(error).toBeInstanceOf(Error);
      expect(isSettingsError(error)).toBe(true);
    }
    expect(isSettingsError(new Error('other'))).toBe(false);
  });

  it('escape control characters in the names and values they list, so none reaches the terminal', () => {
    const unknown = new UnknownSettingError([
      { name: 'router.\u001b[2Jx', source: { source: 'file', path: 'k.yaml', line: 2 }, closest: 'router.y' },
    ]);
    expect(unknown.message).toBe(
      '1 unknown setting name(s):\n  - router.\\u001b[2Jx in file k.yaml:2 (did you mean router.y?)',
    );
    const invalid = new InvalidSettingError([
      {
        setting: 'transport.library',
        name: 'transport.library',
        value: 5,
        source: { source: 'file', path: 'k.\u009byaml' },
        rule: 'a path',
        reason: 'Expected string,\nreceived number',
        related: [],
      },
    ]);
    expect(invalid.message).toBe(
      '1 invalid setting(s):\n  - transport.library = 5 in file k.\\u009byaml: Expected string,\\nreceived number (rule: a path)',
    );
  });

  it('list every unknown name with its source and the closest known name', () => {
    const error = new UnknownSettingError([
      { name: 'router.x', source: { source: 'file', path: '/etc/kvreuse.yaml', line: 2 }, closest: 'router.y' },
      { name: 'KVREUSE_X', source: { source: 'env', variable: 'KVREUSE_X' }, closest: 'KVREUSE_Y' },
      { name: 'run', source: { source: 'argv', flag: 'run' } },
      {
        name: '--transport-backend',
        source: { source: 'argv', flag: '--transport-backend' },
        foreignGroup: 'transport',
      },
      { name: 'routr', source: { source: 'file', path: 'k.yaml' }, foreignGroup: 'routr', closest: 'router' },
      { name: 'router.nope', source: { source: 'code' }, closest: 'router.name' },
    ]);
    expect(error.message).toBe(
      [
        '6 unknown setting name(s):',
        '  - router.x in file /etc/kvreuse.yaml:2 (did you mean router.y?)',
        '  - KVREUSE_X in env (did you mean KVREUSE_Y?)',
        '  - run in argv (not a setting flag)',
        '  - --transport-backend in argv (group transport is not composed by this process)',
        '  - routr in file k.yaml (group routr is not composed by this process; did you mean router?)',
        '  - router.nope in code (did you mean router.name?)',
      ].join('\n'),
    );
  });

  it('keep the credentials of a URL out of an unknown name, such as a value argv left without its flag', () => {
    const url = 'http://alice:secret@etcd:2379';
    const error = new UnknownSettingError([{ name: url, source: { source: 'argv', flag: url } }]);
    expect(error.message).toBe('1 unknown setting name(s):\n  - http://***@etcd:2379 in argv (not a setting flag)');
    expect(error.unknown).toEqual([
      { name: 'http://***@etcd:2379', source: { source: 'argv', flag: 'http://***@etcd:2379' } },
    ]);
  });

  it('name every invalid value as it was written, with its source, value and rule, and the related values of a rule', () => {
    const single = {
      setting: 'router.minimumTransferPrefixBlocks',
      name: 'router.minimum_transfer_prefix_blocks',
      value: 0,
      source: { source: 'file', path: 'k.yaml', line: 3 },
      rule: 'integer ≥ 1',
      reason: 'Too small: expected number to be >=1',
      related: [],
    } as const;
    expect(describeInvalidSetting(single)).toBe(
      'router.minimum_transfer_prefix_blocks = 0 in file k.yaml:3: Too small: expected number to be >=1 (rule: integer ≥ 1)',
    );
    const crossField = {
      setting: 'transport.abandonTimeoutMs',
      name: 'transport.abandon_timeout_ms',
      value: 5000,
      source: { source: 'default' },
      rule: 'transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms',
      reason: 'the merged values break the rule',
      related: [
        {
          setting: 'transport.operationTimeoutMs',
          name: 'KVREUSE_TRANSPORT_OPERATION_TIMEOUT_MS',
          value: 3000,
          source: { source: 'env', variable: 'KVREUSE_TRANSPORT_OPERATION_TIMEOUT_MS' },
        },
      ],
    } as const;
    const error = new InvalidSettingError([single, crossField]);
    expect(error.invalid).toEqual([single, crossField]);
    expect(error.message).toContain('2 invalid setting(s):');
    expect(error.message).toContain(
      'transport.abandon_timeout_ms = 5000 by default, KVREUSE_TRANSPORT_OPERATION_TIMEOUT_MS = 3000 in env: the merged values break the rule',
    );
  });

  it('render NaN, ±Infinity, bigints and nested values as they are, not as JSON null', () => {
    const fromFile = { source: 'file', path: 'k.yaml' } as const;
    const invalid = {
      setting: 'transport.operationTimeoutMs',
      name: 'transport.operation_timeout_ms',
      value: Number.NaN,
      source: fromFile,
      rule: 'transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms',
      reason: 'the merged values break the rule',
      related: [
        {
          setting: 'transport.abandonTimeoutMs',
          name: 'transport.abandon_timeout_ms',
          value: Number.POSITIVE_INFINITY,
          source: fromFile,
        },
      ],
    } as const;
    expect(describeInvalidSetting(invalid)).toBe(
      'transport.operation_timeout_ms = NaN in file k.yaml, transport.abandon_timeout_ms = Infinity in file k.yaml: the merged values break the rule (rule: transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms)',
    );
    expect(describeInvalidSetting({ ...invalid, value: Number.NEGATIVE_INFINITY, related: [] })).toContain(
      'transport.operation_timeout_ms = -Infinity in file k.yaml',
    );
    expect(describeInvalidSetting({ ...invalid, value: 5n, related: [] })).toContain(
      'transport.operation_timeout_ms = 5n in file k.yaml',
    );
    expect(
      new ResolveOptionsError('env', { KVREUSE_A: Number.NaN, KVREUSE_B: [5n] }, { rule: 'an object of strings' })
        .message,
    ).toBe('resolve: env must be an object of strings; got {"KVREUSE_A":NaN,"KVREUSE_B":[5n]}');
    expect(new ResolveOptionsError('args', [], { closest: 'argv' }).message).toBe(
      'resolve: unknown option args (did you mean argv?)',
    );
  });

  it('describe every provenance', () => {
    expect(describeProvenance({ source: 'default' })).toBe('the default');
    expect(describeProvenance({ source: 'file', path: 'a.yaml' })).toBe('file a.yaml');
    expect(describeProvenance({ source: 'file', path: 'a.yaml', line: 12 })).toBe('file a.yaml:12');
    expect(describeProvenance({ source: 'env', variable: 'KVREUSE_A' })).toBe('env KVREUSE_A');
    expect(describeProvenance({ source: 'argv', flag: '--a' })).toBe('argv --a');
  });
});
