import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exampleSettingsPath, resolveSettings } from '@kvreuse/cli';
import { renderSettingsReport, type SettingsEnv } from '@kvreuse/config';
import {
  assembleWorker,
  buildTransferTemplate,
  checkCompatibility,
  materialize,
  parseRankPart,
  type AssembleResult,
  type RankId,
  type Worker,
} from '@kvreuse/descriptors';
import { type WorkerReadiness } from '@kvreuse/discovery';
import { blockHashScheme, hashBlockChain, RetainedInventory } from '@kvreuse/inventory';
import { decide, type RouteDecision, SourceBook } from '@kvreuse/router';

const examplesDir = join(dirname(fileURLToPath(import.meta.url)), '../examples');
export const exampleWorkerFiles = {
  decode: join(examplesDir, 'qwen3-0.6b-decode-tp2.json'),
  prefill: join(examplesDir, 'qwen3-0.6b-prefill-tp1.json'),
} as const;

/** The prefix the demo pulls: 42 blocks of Qwen3-0.6B (the 42-block plan of docs/architecture.md). */
export const demoPrefixBlocks = 42;

export interface MainJobOptions {
  env?: SettingsEnv;
  argv?: readonly string[];
  /** The router's monotonic clock, against which its lookup budget runs (default `performance.now`). */
  clock?: () => number;
}

const rank = (r: RankId): string => `tp${r.tpRank}/pp${r.ppRank}`;
const bytes = (n: bigint): string => `${n.toLocaleString('en-US')} bytes (${(Number(n) / 2 ** 20).toFixed(1)} MiB)`;

function loadWorker(label: string, path: string): { report: string[]; worker?: Worker } {
  const parts = (JSON.parse(readFileSync(path, 'utf8')) as unknown[]).map(parseRankPart);
  const result: AssembleResult = assembleWorker(parts);
  if (!result.complete) {
    const problems = [
      ...result.missing.map((r) => `missing rank ${rank(r)}`),
      ...result.duplicates.map((d) => `rank ${rank(d.rank)} published ${d.count} times`),
      ...result.conflicts.map(
        (c) => `rank ${rank(c.rank)}: ${c.field} is ${String(c.actual)}, expected ${String(c.expected)}`,
      ),
    ];
    return { report: [`${label}: INCOMPLETE (${parts.length} parts)`, ...problems.map((p) => `  - ${p}`)] };
  }
  const w = result.worker;
  return {
    worker: w,
    report: [
      `${label}: complete — ${w.workerId} (${w.role}), TP=${w.tpSize} PP=${w.ppSize}, ${parts.length} rank parts, ` +
        `${w.ranks.reduce((n, p) => n + p.banks.length, 0)} banks, geometry ${w.geometryDigest.slice(0, 16)}…`,
    ],
  };
}

/**
 * The static check of the example workers (the main job itself is `kvreuse demo`): resolve the bundled example settings, check the bundled
 * Qwen3-0.6B example workers (decode TP=2, prefill TP=1) for completeness and compatibility, ask the
 * router whether the prefill worker should pull a 42-block prefix the decode worker retains, and plan
 * the pull it decides.
 */
export function runMainJob(options: MainJobOptions = {}): string {
  const resolved = resolveSettings({ file: exampleSettingsPath, env: options.env ?? {}, argv: options.argv ?? [] });
  const out = [
    '== settings (bundled example, then environment, then argv)',
    renderSettingsReport(resolved).trimEnd(),
    '',
  ];

  out.push('== workers');
  const decode = loadWorker('decode worker', exampleWorkerFiles.decode);
  const prefill = loadWorker('prefill worker', exampleWorkerFiles.prefill);
  out.push(...decode.report, ...prefill.report, '');
  if (decode.worker === undefined || prefill.worker === undefined) {
    out.push('no plan: a worker is incomplete, so it never serves');
    return `${out.join('\n')}\n`;
  }

  out.push('== compatibility (decode → prefill)');
  const compatibility = checkCompatibility(decode.worker, prefill.worker);
  if (!compatibility.ok) {
    out.push('INCOMPATIBLE', ...compatibility.reasons.map((r) => `  - ${r.code}: ${r.message}`));
    return `${out.join('\n')}\n`;
  }
  for (const route of compatibility.mapping.routes) {
    out.push(
      `  ${rank(route.sourceRank)} → ${rank(route.destinationRank)}: KV heads ${route.kvHeads.start}..${route.kvHeads.start + route.kvHeads.count - 1}, layers ${route.layers.start}..${route.layers.start + route.layers.count - 1}`,
    );
  }
  out.push('');

  out.push(`== decision: a ${demoPrefixBlocks}-block prompt the decode worker retains in host memory`);
  const decision = routeDemoPrompt(resolved.settings, decode.worker, prefill.worker, options.clock);
  out.push(`  ${decision.action} (${decision.reason}): ${decision.detail}`);
  for (const rejection of decision.rejected)
    out.push(`  - ${rejection.worker} ${rejection.reason}: ${rejection.detail}`);
  if (decision.action !== 'pull' || decision.source === undefined) return `${out.join('\n')}\n`;
  out.push('');

  const { start, count } = decision.source.blocks;
  out.push(`== plan: pull blocks ${start}..${start + count - 1} (${count} blocks)`);
  const blocks = Uint32Array.from({ length: count }, (_, i) => start + i);
  const plan = materialize(buildTransferTemplate(decode.worker, prefill.worker), {
    sourceBlocks: blocks,
    destinationBlocks: blocks,
  });
  for (const pair of plan.pairs) {
    out.push(
      `  ${rank(pair.sourceRank)} → ${rank(pair.destinationRank)}: ${pair.count} descriptors, ${bytes(pair.bytes)}`,
    );
  }
  out.push(`  total: ${plan.descriptorCount} descriptors, ${bytes(plan.totalBytes)}`);
  return `${out.join('\n')}\n`;
}

/**
 * The router's decision for a prompt of `demoPrefixBlocks` blocks that the decode worker retains in host
 * memory (GPU reuse needs an admitted profile, which the demo does not declare), the prefill worker
 * holding none of it.
 */
function routeDemoPrompt(
  settings: ReturnType<typeof resolveSettings>['settings'],
  decode: Worker,
  prefill: Worker,
  clock: (() => number) | undefined,
): RouteDecision {
  const tokens = Array.from({ length: demoPrefixBlocks * decode.geometry.blockTokens }, (_, i) => (i * 7919) % 151_936);
  const chain = hashBlockChain(tokens, blockHashScheme(decode.geometry, settings.inventory.hashSeed));
  const inventory = new RetainedInventory();
  inventory.apply({
    workerId: decode.workerId,
    incarnation: decode.incarnation,
    epoch: 1,
    seq: 0,
    events: [{ type: 'stored', tier: 'host', blocks: chain, expiresAt: Date.now() + 60_000 }],
    complete: true,
  });
  const sources = new SourceBook({ inventory });
  const readiness: WorkerReadiness = {
    ready: true,
    workerId: decode.workerId,
    incarnation: decode.incarnation,
    epoch: 1,
    worker: decode,
  };
  sources.observe(readiness);
  const activation = {
    mode: 'host-only',
    reasons: ['the demo declares no deployment profile: host memory only'],
  } as const;
  return decide(
    { tokens, destination: { worker: prefill, localBlocks: 0 } },
    { settings, inventory, sources, activation, ...(clock === undefined ? {} : { clock }) },
  );
}
