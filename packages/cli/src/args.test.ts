import { describe, expect, it } from 'vitest';
import { splitArgs } from './args.js';
import { UsageError } from './errors.js';

const specs = [
  { name: 'config', value: '<file>', description: 'settings file' },
  { name: 'worker', value: '<file>', repeatable: true, description: 'worker' },
  { name: 'json', description: 'json' },
  { name: 'output', short: 'o', value: '<format>', description: 'output' },
];

describe('splitArgs', () => {
  it('takes its own options off and leaves setting flags with their values, in order', () => {
    const args = splitArgs(
      'x',
      [
        'p1',
        '--config',
        'k.yaml',
        '--router-minimum-transfer-prefix-blocks',
        '8',
        '--json',
        '--worker=a',
        '--worker',
        'b',
        '--transport-backend=ucx',
      ],
      specs,
    );
    expect(Object.fromEntries(args.options)).toEqual({ config: ['k.yaml'], json: [], worker: ['a', 'b'] });
    expect(args.positionals).toEqual(['p1']);
    expect(args.settingsArgv).toEqual(['--router-minimum-transfer-prefix-blocks', '8', '--transport-backend=ucx']);
  });

  it('a boolean setting flag takes no value, so the next argument stays a positional', () => {
    const args = splitArgs(
      'x',
      ['--router-enable-decode-to-prefill-reuse', 'p1', '--no-router-enable-decode-to-prefill-gpu-reuse', 'p2'],
      specs,
    );
    expect(args.settingsArgv).toEqual([
      '--router-enable-decode-to-prefill-reuse',
      '--no-router-enable-decode-to-prefill-gpu-reuse',
    ]);
    expect(args.positionals).toEqual(['p1', 'p2']);
  });

  it('a flag no setting has keeps its value with it, for config to name', () => {
    expect(splitArgs('x', ['--router-nope', '1'], specs).settingsArgv).toEqual(['--router-nope', '1']);
  });

  it('-h is --help', () => {
    expect(splitArgs('x', ['-h'], specs).options.has('help')).toBe(true);
  });

  it('a one-letter alias is its option, its value next or after =', () => {
    expect(splitArgs('x', ['-o', 'yaml'], specs).options.get('output')).toEqual(['yaml']);
    expect(splitArgs('x', ['-o=json', 'p1'], specs)).toMatchObject({
      options: new Map([['output', ['json']]]),
      positionals: ['p1'],
    });
    expect(splitArgs('x', ['-x'], specs).positionals).toEqual(['-x']);
  });

  it.each([
    [['-o', 'json', '--output', 'yaml'], 'x: --output is given more than once (see kvreuse x --help)'],
    [['--config'], 'x: --config needs a value: --config <file> (see kvreuse x --help)'],
    [['--config', 'a', '--config', 'b'], 'x: --config is given more than once (see kvreuse x --help)'],
    [['--json=yes'], 'x: --json takes no value (see kvreuse x --help)'],
    [['--config', ''], 'x: --config needs a value, not an empty one: --config <file> (see kvreuse x --help)'],
    [['--config='], 'x: --config needs a value, not an empty one: --config <file> (see kvreuse x --help)'],
    [
      ['--worker', 'a', '--worker', ''],
      'x: --worker needs a value, not an empty one: --worker <file> (see kvreuse x --help)',
    ],
    [['-o', ''], 'x: -o needs a value, not an empty one: -o <format> (see kvreuse x --help)'],
  ])('%j is a usage error', (argv, message) => {
    expect(() => splitArgs('x', argv, specs)).toThrow(UsageError);
    expect(() => splitArgs('x', argv, specs)).toThrow(message);
  });
});
