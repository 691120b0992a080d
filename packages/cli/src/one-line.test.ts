import { kvreuseSettings } from './settings/all-settings.js';
import { describe, expect, it } from 'vitest';
import { oneLine, problemLines } from './one-line.js';

function settingsError(argv: string[]) {
  const result = kvreuseSettings.safeResolve({ argv });
  if (result.success) throw new Error('expected a settings error');
  return result.error;
}

describe('problemLines and oneLine', () => {
  it('a settings error: every problem on its own line, and all of them on one line after the headline', () => {
    const error = settingsError(['--router-nope', '1', '--transport-bakend', 'ucx']);
    expect(problemLines(error)).toEqual([
      expect.stringMatching(/^--router-nope in argv \(did you mean --router-\S+\?\)$/),
      '--transport-bakend in argv (did you mean --transport-backend?)',
    ]);
    expect(oneLine(error)).toBe(`2 unknown setting name(s): ${problemLines(error).join('; ')}`);
  });

  it('any other error: its message with every run of whitespace made one space', () => {
    expect(oneLine(new Error('first\n  second   third \n'))).toBe('first second third');
    expect(oneLine('plain')).toBe('plain');
  });
});
