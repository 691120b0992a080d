// The seeds `pnpm chaos` runs: `--seeds N` (default 50) runs seeds 1 … N, `--seed S` replays seed S alone,
// `--kind K` runs the first N seeds whose fault is of kind K instead.
import { parseArgs } from 'node:util';
import { ChaosUsageError } from './errors.js';
import { type FaultKind, faultKinds } from './scenario.js';

export const defaultSeedCount = 50;

function whole(option: string, text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < 1 || value > 0xffffffff)
    throw new ChaosUsageError(option, `must be a whole number from 1 to 4294967295, got ${JSON.stringify(text)}`);
  return value;
}

/** The seeds the arguments ask for, `kindOf` telling each seed's fault; ChaosUsageError naming the option for anything else. */
export function seedsOf(argv: readonly string[], kindOf: (seed: number) => FaultKind): number[] {
  let values: { seeds?: string | undefined; seed?: string | undefined; kind?: string | undefined };
  try {
    ({ values } = parseArgs({
      args: argv.filter((arg) => arg !== '--'),
      options: { seeds: { type: 'string' }, seed: { type: 'string' }, kind: { type: 'string' } },
      strict: true,
    }));
  } catch (error) {
    throw new ChaosUsageError('arguments', `must be --seeds N, --seed S or --kind K: ${(error as Error).message}`);
  }
  if (values.seed !== undefined && values.seeds !== undefined)
    throw new ChaosUsageError('--seed', 'replays one run: leave --seeds out');
  if (values.seed !== undefined && values.kind !== undefined)
    throw new ChaosUsageError('--seed', 'replays one run whatever its kind: leave --kind out');
  if (values.seed !== undefined) return [whole('--seed', values.seed)];
  const count = values.seeds === undefined ? defaultSeedCount : whole('--seeds', values.seeds);
  const { kind } = values;
  if (kind === undefined) return Array.from({ length: count }, (_, i) => i + 1);
  if (!(faultKinds as readonly string[]).includes(kind))
    throw new ChaosUsageError('--kind', `must be one of ${faultKinds.join(', ')}, got ${JSON.stringify(kind)}`);
  const seeds: number[] = [];
  for (let seed = 1; seeds.length < count; seed++) if (kindOf(seed) === kind) seeds.push(seed);
  return seeds;
}
