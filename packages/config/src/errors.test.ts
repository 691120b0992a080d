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
    const unknown = new UnknownSettingError([{ name: 'KVREUSE_X', source: { source: 'env', variable: 'KVREUSE_X' }, closest: 'KVREUSE_Y' }]);
    const invalid = new InvalidSettingError([]);
    const file = new SettingsFileError('k.yaml', 'cannot be read');
    expect([unknown.code, invalid.code, file.code]).toEqual(['UNKNOWN_SETTING', 'INVALID_SETTING', 'SETTINGS_FILE']);
    expect([unknown.name, invalid.name, file.name]).toEqual(['UnknownSettingError', 'InvalidSettingError', 'SettingsFileError']);
    for (const error of [unknown, invalid, file]) {
      expect(error).toBeInstanceOf(Error);
      expect(isSettingsError(error)).toBe(true);
    }
    expect(isSettingsError(new Error('other'))).toBe(false);
  });

  it('list every unknown name with its source and the closest known name', () => {
    const error = new UnknownSettingError([
      { name: 'router.x', source: { source: 'file', path: '/etc/kvreuse.yaml' }, closest: 'router.y' },
      { name: 'KVREUSE_X', source: { source: 'env', variable: 'KVREUSE_X' }, closest: 'KVREUSE_Y' },
      { name: 'run', source: { source: 'argv', flag: 'run' } },
    ]);
    expect(error.message).toBe(
      [
        '3 unknown setting name(s):',
        '  - router.x in file /etc/kvreuse.yaml (did you mean router.y?)',
        '  - KVREUSE_X in env (did you mean KVREUSE_Y?)',
        '  - run in argv (not a setting flag)',
      ].join('\n'),
    );
  });

  it('name the setting, value, source and rule of every invalid value, and the related values of a rule', () => {
    const single = {
      setting: 'router.minimumTransferPrefixBlocks',
      value: '0',
      source: { source: 'argv', flag: '--router-minimum-transfer-prefix-blocks' },
      rule: 'integer ≥ 1',
      reason: 'Too small: expected number to be >=1',
      related: [],
    } as const;
    expect(describeInvalidSetting(single)).toBe(
      'router.minimumTransferPrefixBlocks = "0" from argv --router-minimum-transfer-prefix-blocks: Too small: expected number to be >=1 (rule: integer ≥ 1)',
    );
    const crossField = {
      setting: 'transport.abandonTimeoutMs',
      value: 5000,
      source: { source: 'default' },
      rule: 'transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms',
      reason: 'the merged values break the rule',
      related: [{ setting: 'transport.operationTimeoutMs', value: 3000, source: { source: 'file', path: 'k.yaml' } }],
    } as const;
    const error = new InvalidSettingError([single, crossField]);
    expect(error.invalid).toEqual([single, crossField]);
    expect(error.message).toContain('2 invalid setting(s):');
    expect(error.message).toContain(
      'transport.abandonTimeoutMs = 5000 from the default, transport.operationTimeoutMs = 3000 from file k.yaml: the merged values break the rule',
    );
  });

  it('render NaN, ±Infinity, bigints and nested values as they are, not as JSON null', () => {
    const fromFile = { source: 'file', path: 'k.yaml' } as const;
    const invalid = {
      setting: 'transport.operationTimeoutMs',
      value: Number.NaN,
      source: fromFile,
      rule: 'transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms',
      reason: 'the merged values break the rule',
      related: [{ setting: 'transport.abandonTimeoutMs', value: Number.POSITIVE_INFINITY, source: fromFile }],
    } as const;
    expect(describeInvalidSetting(invalid)).toBe(
      'transport.operationTimeoutMs = NaN from file k.yaml, transport.abandonTimeoutMs = Infinity from file k.yaml: the merged values break the rule (rule: transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms)',
    );
    expect(describeInvalidSetting({ ...invalid, value: Number.NEGATIVE_INFINITY, related: [] })).toContain('transport.operationTimeoutMs = -Infinity from file k.yaml');
    expect(describeInvalidSetting({ ...invalid, value: 5n, related: [] })).toContain('transport.operationTimeoutMs = 5n from file k.yaml');
    expect(new ResolveOptionsError('env', { KVREUSE_A: Number.NaN, KVREUSE_B: [5n] }, 'an object of strings').message).toBe(
      'resolveSettings: env must be an object of strings; got {"KVREUSE_A":NaN,"KVREUSE_B":[5n]}',
    );
  });

  it('describe every provenance', () => {
    expect(describeProvenance({ source: 'default' })).toBe('the default');
    expect(describeProvenance({ source: 'file', path: 'a.yaml' })).toBe('file a.yaml');
    expect(describeProvenance({ source: 'env', variable: 'KVREUSE_A' })).toBe('env KVREUSE_A');
    expect(describeProvenance({ source: 'argv', flag: '--a' })).toBe('argv --a');
  });
});
