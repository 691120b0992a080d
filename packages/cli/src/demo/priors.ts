// The router's priors for the main job, from the machine it runs on rather than the settings' defaults
// (100 µs a block, 50 µs a token: figures for no machine in particular). A block over the link costs
// what turn 1's hand-off measured on that very link; recomputing a token costs at least Qwen3-0.6B's
// prefill arithmetic at this machine's peak compute. The transfer is priced high and the recompute low,
// so a pull the router calls worth it is worth it; the pull's receipt then replaces the link's price.
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import type { Settings } from '../settings/all-settings.js';

/** Qwen3-0.6B's published configuration (huggingface.co/Qwen/Qwen3-0.6B, config.json). */
const qwen3 = { layers: 28, hidden: 1024, queryHeads: 16, kvHeads: 8, headDim: 128, intermediate: 3072 } as const;

/**
 * FLOPs a token of prefill costs at least: 2 per multiply-add of every layer's weight matrices (the q, k,
 * v and o projections, the MLP's gate, up and down). The attention over the context and the embedding
 * are left out, so this is a lower bound: 880,803,840.
 */
export const prefillFlopsPerToken =
  2 *
  qwen3.layers *
  (qwen3.hidden * qwen3.queryHeads * qwen3.headDim +
    2 * qwen3.hidden * qwen3.kvHeads * qwen3.headDim +
    qwen3.queryHeads * qwen3.headDim * qwen3.hidden +
    3 * qwen3.hidden * qwen3.intermediate);

/**
 * bf16 FLOPs a core retires a cycle, at most: two 512-bit FMA units each completing an AVX-512 BF16 dot
 * product (VDPBF16PS: 16 lanes × 2 products × 2 FLOPs). No x86 core without a matrix unit (AMX) does more;
 * the AMD EPYC (Zen 4) cores of the machines this demo is run on do half, their 512-bit work split in two.
 */
export const peakBf16FlopsPerCycle = 128;

/** Where a prior of the run came from: measured or derived on this machine, or the settings a user gave. */
export interface DemoPrior {
  readonly value: number;
  readonly source: 'measured' | 'derived' | 'settings';
  /** How it was come by, in words, with the values. */
  readonly detail: string;
}

export interface DemoPriors {
  /** `router.transfer_source_estimated_block_us` for this run: µs a block from a host-memory source. */
  readonly blockUs: DemoPrior;
  /** `router.transfer_source_prefill_token_us` for this run: µs a token of recomputed prefill. */
  readonly prefillTokenUs: DemoPrior;
}

/** The machine's compute: its cores (those this process may use) and their fastest reported clock. */
export interface Compute {
  readonly cores: number;
  readonly mhz: number;
}

/** The fastest clock `/proc/cpuinfo` reports (`cpu MHz`), or 0: in a virtual machine Node's `cpus()` may report none. */
function cpuinfoMhz(): number {
  try {
    const reported = [...readFileSync('/proc/cpuinfo', 'utf8').matchAll(/^cpu MHz\s*:\s*([\d.]+)$/gm)];
    return Math.max(0, ...reported.map((match) => Math.round(Number(match[1]))));
  } catch {
    return 0;
  }
}

/** This machine's compute (its fastest reported clock), or undefined when it reports no clock. */
export function thisMachine(): Compute | undefined {
  const mhz = Math.max(0, ...cpus().map((cpu) => cpu.speed)) || cpuinfoMhz();
  return mhz > 0 ? { cores: availableParallelism(), mhz } : undefined;
}

/** The least time a token of Qwen3-0.6B's prefill can take on `compute`, in µs. */
export function prefillTokenUsOn({ cores, mhz }: Compute): number {
  return prefillFlopsPerToken / (cores * mhz * peakBf16FlopsPerCycle);
}

const round = (value: number): string => value.toLocaleString('en-US', { maximumFractionDigits: 0 });

/**
 * The run's priors: each measured or derived here, unless the settings give it (by a flag, a variable or
 * a settings file; the bundled example leaves both to the demo).
 */
export function demoPriors(
  settings: Settings,
  given: { readonly blockUs: boolean; readonly prefillTokenUs: boolean },
  handOff: { readonly blocks: number; readonly ms: number },
  compute: Compute | undefined,
): DemoPriors {
  const { router } = settings;
  const blockUs: DemoPrior = given.blockUs
    ? {
        value: router.transferSourceEstimatedBlockUs,
        source: 'settings',
        detail: 'router.transfer_source_estimated_block_us',
      }
    : {
        value: (handOff.ms * 1000) / handOff.blocks,
        source: 'measured',
        detail: `turn 1's hand-off WRITEs over this link: ${handOff.blocks} blocks in ${handOff.ms.toFixed(1)} ms, one block at a time`,
      };
  const prefillTokenUs: DemoPrior =
    given.prefillTokenUs || compute === undefined
      ? {
          value: router.transferSourcePrefillTokenUs,
          source: 'settings',
          detail: `router.transfer_source_prefill_token_us${given.prefillTokenUs ? '' : ': this machine reports no clock to derive it from'}`,
        }
      : {
          value: prefillTokenUsOn(compute),
          source: 'derived',
          detail:
            `Qwen3-0.6B's ${round(prefillFlopsPerToken)} FLOPs a token at this machine's peak: ` +
            `${compute.cores} cores × ${compute.mhz} MHz × ${peakBf16FlopsPerCycle} bf16 FLOPs a cycle`,
        };
  return { blockUs, prefillTokenUs };
}

/** The settings with the run's priors in the router's group. */
export function withPriors(settings: Settings, priors: DemoPriors): Settings {
  return {
    ...settings,
    router: {
      ...settings.router,
      transferSourceEstimatedBlockUs: priors.blockUs.value,
      transferSourcePrefillTokenUs: priors.prefillTokenUs.value,
    },
  };
}

/** The progress lines that say what the router's priors are and where they come from. */
export function priorLines(priors: DemoPriors): string[] {
  return [
    `priors: a block over the link ${round(priors.blockUs.value)} µs (${priors.blockUs.source}: ${priors.blockUs.detail})`,
    `  recomputing a token ${round(priors.prefillTokenUs.value)} µs (${priors.prefillTokenUs.source}: ${priors.prefillTokenUs.detail})`,
  ];
}
