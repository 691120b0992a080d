// `pnpm chaos [--seeds N] [--seed S] [--kind K]`: N seeded runs (default 50, seeds 1 … N, or the first N
// seeds of fault kind K), or the one run of seed S;
// a line per run (its seed first, to replay it), then the counts per fault kind and outcome. Exits 1 if
// any run hung, broke an invariant or could not start its ranks.
import { OutcomeCounts } from './counts.js';
import { ChaosHangError, ChaosSetupError } from './errors.js';
import { chaosTransport, runScenario } from './run-scenario.js';
import { describeScenario, scenarioOf } from './scenario.js';
import { seedsOf } from './seeds.js';

let seeds: number[];
try {
  seeds = seedsOf(process.argv.slice(2), (seed) => scenarioOf(seed, chaosTransport.abandonTimeoutMs).kind);
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(2);
}

const counts = new OutcomeCounts();
const started = performance.now();
for (const seed of seeds) {
  const scenario = scenarioOf(seed, chaosTransport.abandonTimeoutMs);
  try {
    const result = await runScenario(scenario);
    counts.add(scenario.kind, result.outcome, result.quarantine);
    console.log(
      `${describeScenario(scenario)} → ${result.outcome} (${(result.ms / 1000).toFixed(1)} s): ${result.evidence.join('; ')}`,
    );
  } catch (error) {
    counts.add(
      scenario.kind,
      error instanceof ChaosHangError ? 'hang' : error instanceof ChaosSetupError ? 'setup-failed' : 'invariant',
    );
    console.log(
      `${describeScenario(scenario)} → FAILED: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`,
    );
  }
}
console.log(`\n${seeds.length} runs in ${((performance.now() - started) / 1000).toFixed(0)} s`);
for (const line of counts.render()) console.log(line);
process.exit(counts.failed === 0 ? 0 : 1);
