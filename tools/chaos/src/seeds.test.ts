import { describe, expect, it } from 'vitest';
import { ChaosUsageError } from './errors.js';
import { scenarioOf } from './scenario.js';
import { seedsOf } from './seeds.js';

const kindOf = (seed: number) => scenarioOf(seed, 2_000).kind;

describe('seedsOf', () => {
  it('runs seeds 1 … 50 by default, 1 … N with --seeds N, and seed S alone with --seed S', () => {
    expect(seedsOf([], kindOf)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(seedsOf(['--seeds', '3'], kindOf)).toEqual([1, 2, 3]);
    expect(seedsOf(['--', '--seed', '4294967295'], kindOf)).toEqual([4294967295]);
  });

  it('runs the first N seeds of one fault kind with --kind K (--seeds N, default 50)', () => {
    expect(seedsOf(['--kind', 'stop-over-tcp', '--seeds', '4'], kindOf)).toEqual([1, 6, 10, 11]);
    const lockSqlite = seedsOf(['--kind', 'lock-sqlite'], kindOf);
    expect(lockSqlite).toHaveLength(50);
    expect(lockSqlite.every((seed) => kindOf(seed) === 'lock-sqlite')).toBe(true);
  });

  it.each([
    [['--seeds', '0'], '--seeds', 'chaos: --seeds must be a whole number from 1 to 4294967295, got "0"'],
    [['--seed', '1.5'], '--seed', 'chaos: --seed must be a whole number from 1 to 4294967295, got "1.5"'],
    [['--seed', '4294967296'], '--seed', 'chaos: --seed must be a whole number from 1 to 4294967295, got "4294967296"'],
    [['--seed', '2', '--seeds', '3'], '--seed', 'chaos: --seed replays one run: leave --seeds out'],
    [
      ['--seed', '2', '--kind', 'stop-rank'],
      '--seed',
      'chaos: --seed replays one run whatever its kind: leave --kind out',
    ],
    [
      ['--kind', 'stop'],
      '--kind',
      'chaos: --kind must be one of kill-decode, kill-prefill, stop-rank, stop-over-tcp, restart-etcd, lock-sqlite, got "stop"',
    ],
    [['--runs', '3'], 'arguments', "chaos: arguments must be --seeds N, --seed S or --kind K: Unknown option '--runs'"],
  ])('refuses %j naming %s', (argv, option, message) => {
    const refused = (() => {
      try {
        seedsOf(argv, kindOf);
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(refused).toBeInstanceOf(ChaosUsageError);
    expect(refused).toMatchObject({ code: 'CHAOS_USAGE', option, message: expect.stringContaining(message) });
  });
});
