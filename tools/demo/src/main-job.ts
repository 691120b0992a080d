import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { exampleSettingsPath, renderSettingsReport, resolveSettings, type SettingsEnv } from '@kvreuse/config';
import {
  assembleWorker,
  checkCompatibility,
  parseRankPart,
  planTransfer,
  type AssembleResult,
  type RankId,
  type Worker,
} from '@kvreuse/descriptors';

const examplesDir = join(dirname(fileURLToPath(import.meta.url)), '../examples');
export const exampleWorkerFiles = {
  decode: join(examplesDir, 'qwen3-0.6b-decode-tp2.json'),
  prefill: join(examplesDir, 'qwen3-0.6b-prefill-tp1.json'),
} as const;

/** The prefix the demo pulls: 42 blocks of Qwen3-0.6B, DESIGN.md's reference. */
export const demoPrefixBlocks = 42;

export interface MainJobOptions {
  env?: SettingsEnv;
  argv?: readonly string[];
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
      ...result.conflicts.map((c) => `rank ${rank(c.rank)}: ${c.field} is ${String(c.actual)}, expected ${String(c.expected)}`),
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
 * The main job until the end-to-end demo lands: resolve the bundled example settings, check the bundled
 * Qwen3-0.6B example workers (decode TP=2, prefill TP=1) for completeness and compatibility, and plan
 * the pull of a 42-block prefix from decode to prefill.
 */
export function runMainJob(options: MainJobOptions = {}): string {
  const resolved = resolveSettings({ file: exampleSettingsPath, env: options.env ?? {}, argv: options.argv ?? [] });
  const { router } = resolved.settings;
  const out = ['== settings (bundled example, then environment, then argv)', renderSettingsReport(resolved).trimEnd(), ''];

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
    out.push(`  ${rank(route.sourceRank)} → ${rank(route.destinationRank)}: KV heads ${route.kvHeads.start}..${route.kvHeads.start + route.kvHeads.count - 1}, layers ${route.layers.start}..${route.layers.start + route.layers.count - 1}`);
  }
  out.push('');

  out.push(`== plan: pull a ${demoPrefixBlocks}-block prefix`);
  if (!router.enableDecodeToPrefillReuse) {
    out.push('reuse is off (router.enable_decode_to_prefill_reuse = false): the prefill worker recomputes');
    return `${out.join('\n')}\n`;
  }
  if (demoPrefixBlocks < router.minimumTransferPrefixBlocks) {
    out.push(`prefix of ${demoPrefixBlocks} blocks is below router.minimum_transfer_prefix_blocks = ${router.minimumTransferPrefixBlocks}: recompute`);
    return `${out.join('\n')}\n`;
  }
  const blocks = Array.from({ length: demoPrefixBlocks }, (_, i) => [i, i] as const);
  const plan = planTransfer(decode.worker, prefill.worker, blocks);
  for (const pair of plan.pairs) {
    out.push(`  ${rank(pair.sourceRank)} → ${rank(pair.destinationRank)}: ${pair.count} descriptors, ${bytes(pair.bytes)}`);
  }
  out.push(`  total: ${plan.descriptorCount} descriptors, ${bytes(plan.totalBytes)}`);
  const transferMs = (demoPrefixBlocks * router.transferSourceEstimatedBlockUs) / 1000;
  const recomputeMs = (demoPrefixBlocks * prefill.worker.geometry.blockTokens * router.transferSourcePrefillTokenUs) / 1000;
  out.push(`  estimate: transfer ${transferMs.toFixed(1)} ms vs recompute ${recomputeMs.toFixed(1)} ms (router settings)`);
  return `${out.join('\n')}\n`;
}
