import { describe, expect, it } from 'vitest';
import { ConfigArgumentError, isConfigError } from './errors.js';
import { closestName } from './names.js';
import { findSettingsFile } from './settings-file.js';
import { renderSettingsReport } from './settings-report.js';

function refusal(call: () => unknown): ConfigArgumentError {
  try {
    call();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigArgumentError);
    expect(isConfigError(error)).toBe(true);
    return error as ConfigArgumentError;
  }
  throw new Error('expected a ConfigArgumentError, nothing was thrown');
}

describe('arguments of the wrong shape get ConfigArgumentError, naming the argument', () => {
  it('findSettingsFile', () => {
    expect(refusal(() => findSettingsFile(undefined as never)).argument).toBe('locations');
    expect(refusal(() => findSettingsFile({ env: {}, cwd: 5 } as never)).message).toMatch(
      /findSettingsFile: locations\.cwd must be .*; got 5/,
    );
    expect(refusal(() => findSettingsFile({ env: null, cwd: '/' } as never)).argument).toBe('locations.env');
    expect(refusal(() => findSettingsFile({ option: 3, env: {}, cwd: '/' } as never)).argument).toBe(
      'locations.option',
    );
  });

  it('closestName', () => {
    expect(refusal(() => closestName(5 as never, ['a'])).argument).toBe('unknown');
    expect(refusal(() => closestName('a', null as never)).argument).toBe('candidates');
    expect(refusal(() => closestName('a', ['a', 7] as never)).argument).toBe('candidates');
    expect(refusal(() => closestName('a', ['a'], Number.NaN)).argument).toBe('maxDistance');
  });

  it('renderSettingsReport', () => {
    expect(refusal(() => renderSettingsReport(null as never)).argument).toBe('resolved');
    expect(refusal(() => renderSettingsReport({ settings: {}, provenance: {} } as never)).argument).toBe(
      'resolved.ignored',
    );
  });
});
