// The seeds `pnpm chaos` runs: `--seeds N` (default 50) runs seeds 1 … N, `--seed S` replays seed S alone.
import { parseArgs } from 'node:util';
import { ChaosUsageError } from './errors.js';

export const defaultSeedCount = 50;

function whole(option: string, text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < 1 || value > 0xffffffff) throw new ChaosUsageError(option, `must be a whole number from 1 to 4294967295, got ${JSON.stringify(text)}`);
  return value;
}

/** The seeds the arguments ask for; ChaosUsageError naming the option for anything else. */
export function seedsOf(argv: readonly string[]): number[] {
  let values: { seeds?: string | undefined; seed?: string | undefined };
  try {
    ({ values } = parseArgs({ args: argv.filter((arg) => arg !== '--'), options: { seeds: { type: 'string' }, seed: { type: 'string' } }, strict: true }));
  } catch (error) {
    throw new ChaosUsageError('arguments', `must be --seeds N or --seed S: ${(error as Error).message}`);
  }
  if (values.seed !== undefined && values.seeds !== undefined) throw new ChaosUsageError('--seed', 'replays one run: leave --seeds out');
  if (values.seed !== undefined) return [whole('--seed', values.seed)];
  const count = values.seeds === undefined ? defaultSeedCount : whole('--seeds', values.seeds);
  return Array.from({ length: count }, (_, i) => i + 1);
}
