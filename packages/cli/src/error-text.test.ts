import { kvreuseSettings } from './settings/all-settings.js';
import { describe, expect, it } from 'vitest';
import { errorText, problemLines } from './error-text.js';

function settingsError(argv: string[]) {
  const result = kvreuseSettings.safeResolve({ argv });
  if (result.success) throw new Error('expected a settings error');
  return result.error;
}

describe('problemLines', () => {
  it('a settings error: every problem on its own line', () => {
    const error = settingsError(['--router-nope', '1', '--transport-bakend', 'ucx']);
    expect(problemLines(error)).toEqual([
      expect.stringMatching(/^--router-nope in argv \(did you mean --router-\S+\?\)$/),
      '--transport-bakend in argv (did you mean --transport-backend?)',
    ]);
  });
});

describe('errorText', () => {
  it('a settings error: the headline with its code, then each problem once, on its own line', () => {
    const error = settingsError(['--router-nope', '1', '--transport-bakend', 'ucx']);
    expect(errorText(error, false)).toBe(
      ['kvreuse: 2 unknown setting name(s): [UNKNOWN_SETTING]', ...problemLines(error).map((p) => `  - ${p}`), ''].join(
        '\n',
      ),
    );
  });

  it('a settings error of one problem: on one line', () => {
    const error = settingsError(['--transport-bakend', 'ucx']);
    expect(errorText(error, false)).toBe(
      'kvreuse: 1 unknown setting name(s): --transport-bakend in argv (did you mean --transport-backend?) [UNKNOWN_SETTING]\n',
    );
  });

  it('a message with a code frame keeps its lines as they are, without trailing blanks', () => {
    const error = new Error('not valid YAML at line 2, column 4:\n\nx: [1,\n   ^\n\n');
    expect(errorText(error, false)).toBe('kvreuse: not valid YAML at line 2, column 4:\n\nx: [1,\n   ^\n');
  });

  it('verbose: the message once, then its frames, then each cause by its headline and its own frames', () => {
    const error = new Error('outer\nsecond line', { cause: new TypeError('inner\nits frame') });
    const lines = errorText(error, true).trimEnd().split('\n');
    expect(lines.slice(0, 2)).toEqual(['kvreuse: outer', 'second line']);
    expect(lines.filter((line) => line.includes('second line') || line.includes('its frame'))).toHaveLength(1);
    const causedBy = lines.indexOf('caused by: TypeError: inner');
    expect(causedBy).toBeGreaterThan(2);
    expect(lines.slice(2, causedBy).every((line) => /^\s+at /.test(line))).toBe(true);
    expect(lines.slice(causedBy + 1).every((line) => /^\s+at /.test(line))).toBe(true);
  });

  it('anything thrown that is not an Error: its text', () => {
    expect(errorText('plain', true)).toBe('kvreuse: plain\n');
  });
});
