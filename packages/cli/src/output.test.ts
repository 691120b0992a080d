import { describe, expect, it } from 'vitest';
import { splitArgs } from './args.js';
import { UsageError } from './errors.js';
import { jsonLinesOf, lineOptions } from './output.js';

const linesOf = (argv: readonly string[]): boolean => jsonLinesOf('sidecar', splitArgs('sidecar', argv, lineOptions));

describe('jsonLinesOf', () => {
  it('prints lines for people by default and with -o table, JSON lines with -o json or --json', () => {
    expect(
      [[], ['-o', 'table'], ['-o', 'json'], ['--output=json'], ['--json'], ['--json', '-o', 'json']].map(linesOf),
    ).toEqual([false, false, true, true, true, true]);
  });

  it('refuses yaml, which is one document, and formats it does not know, naming the command', () => {
    expect(() => linesOf(['-o', 'yaml'])).toThrow(UsageError);
    expect(() => linesOf(['-o', 'yaml'])).toThrow(/sidecar: .*-o table or -o json/);
    expect(() => linesOf(['-o', 'csv'])).toThrow(/-o must be one of table, json, yaml; got "csv"/);
    expect(() => linesOf(['--json', '-o', 'table'])).toThrow(/--json and -o table ask for different outputs/);
  });
});
