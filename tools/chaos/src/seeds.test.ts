import { describe, expect, it } from 'vitest';
import { ChaosUsageError } from './errors.js';
import { seedsOf } from './seeds.js';

describe('seedsOf', () => {
  it('runs seeds 1 … 50 by default, 1 … N with --seeds N, and seed S alone with --seed S', () => {
    expect(seedsOf([])).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(seedsOf(['--seeds', '3'])).toEqual([1, 2, 3]);
    expect(seedsOf(['--', '--seed', '4294967295'])).toEqual([4294967295]);
  });

  it.each([
    [['--seeds', '0'], '--seeds', 'chaos: --seeds must be a whole number from 1 to 4294967295, got "0"'],
    [['--seed', '1.5'], '--seed', 'chaos: --seed must be a whole number from 1 to 4294967295, got "1.5"'],
    [['--seed', '4294967296'], '--seed', 'chaos: --seed must be a whole number from 1 to 4294967295, got "4294967296"'],
    [['--seed', '2', '--seeds', '3'], '--seed', 'chaos: --seed replays one run: leave --seeds out'],
    [['--runs', '3'], 'arguments', "chaos: arguments must be --seeds N or --seed S: Unknown option '--runs'"],
  ])('refuses %j naming %s', (argv, option, message) => {
    const refused = (() => {
      try {
        seedsOf(argv);
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(refused).toBeInstanceOf(ChaosUsageError);
    expect(refused).toMatchObject({ code: 'CHAOS_USAGE', option, message: expect.stringContaining(message) });
  });
});
