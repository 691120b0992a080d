// What the main job reports: the summary object `--json` prints last, and the one line printed last without it.
import type { VerifyMode } from '@kvreuse/endpoint';
import type { MemoryKind } from '@kvreuse/native-bindings';
import type { DemoPriors } from './priors.js';
import type { DrainSummary, PullReport } from './rank-messages.js';
import type { RankDrain } from './rank-processes.js';

export interface DemoDecision {
  readonly request: string;
  readonly action: 'pull' | 'recompute';
  readonly reason: string;
  readonly detail: string;
  /** Blocks pulled (pull), or the blocks the best candidate would have supplied. */
  readonly blocks: number;
  readonly savingMs: number;
  readonly costMs: number;
  readonly rejected: readonly string[];
}

export interface DemoPull {
  /** Where the pull's banks are: host memory (`dram`) or GPU memory (`vram`, with GPU reuse active). */
  readonly memory: MemoryKind;
  readonly blocks: number;
  readonly bytes: number;
  readonly verified: boolean;
  /** The endpoint's checksum verification (`endpoint.verify`), and the blocks it compared. */
  readonly verify: VerifyMode;
  readonly checkedBlocks: number;
  readonly ms: number;
  /** Gbit/s. */
  readonly gbitPerS: number;
  readonly recomputedBlocks: number;
  /** The estimated TTFT saving the pull measured, and the router's prediction. */
  readonly savingMs: { readonly predicted: number; readonly measured: number };
}

/** What the turn 2 pull's receipt taught the router: its transfer estimate for the pulled blocks before and after, against the measured time. */
export interface DemoCalibration {
  readonly blocks: number;
  readonly transferMs: { readonly prior: number; readonly measured: number; readonly calibrated: number };
  /** Turn 2 decided again, on the calibrated estimate. */
  readonly decision: DemoDecision;
}

export interface DemoDrainRow {
  readonly process: string;
  readonly exitCode: number | null;
  readonly signal: string | null;
  /** Null for a process that ended without a drain report (the killed one). */
  readonly banksReturned: number | null;
  readonly banksRetained: number | null;
  /** The pins its drain waited for (each with its reader, its blocks and how it ended); null without a drain report. */
  readonly pins: DrainSummary['pins'] | null;
}

export interface DemoSummary {
  readonly handOff: { readonly blocks: number; readonly bytes: number; readonly ms: number };
  /** The router's priors for the run, and where each came from. */
  readonly priors: DemoPriors;
  readonly decisions: readonly DemoDecision[];
  /** Null when the router did not route turn 2 to a pull. */
  readonly pull: DemoPull | null;
  /** Null without a pull whose receipt priced its blocks. */
  readonly calibration: DemoCalibration | null;
  readonly gpu: { readonly active: boolean; readonly mode: string; readonly reason: string };
  /** Null when there was no pull. */
  readonly killedRank: {
    readonly process: string;
    readonly signal: string | null;
    readonly recomputed: number;
    readonly committedBlocks: number;
    readonly verified: boolean;
    readonly reasons: readonly string[];
  } | null;
  readonly drain: readonly DemoDrainRow[];
}

export function pullSummary(report: PullReport): DemoPull {
  return {
    memory: report.memory,
    blocks: report.blocks,
    bytes: report.bytes,
    verified: report.verified,
    verify: report.verify,
    checkedBlocks: report.checkedBlocks,
    ms: report.ms,
    gbitPerS: report.gbitPerS,
    recomputedBlocks: report.recomputed.blocks,
    savingMs: { predicted: report.saving?.predictedMs ?? 0, measured: report.saving?.measuredMs ?? 0 },
  };
}

export function drainRow(drain: RankDrain): DemoDrainRow {
  return {
    process: drain.process,
    exitCode: drain.exitCode,
    signal: drain.signal,
    banksReturned: drain.drain?.banksReturned ?? null,
    banksRetained: drain.drain?.banksRetained ?? null,
    pins: drain.drain?.pins ?? null,
  };
}

/** The last line without `--json`. */
export function summaryLine(summary: DemoSummary): string {
  const { pull, killedRank } = summary;
  const drained = summary.drain.filter((row) => row.banksReturned !== null);
  const returned = drained.reduce((sum, row) => sum + (row.banksReturned ?? 0), 0);
  const retained = drained.reduce((sum, row) => sum + (row.banksRetained ?? 0), 0);
  const waited = drained.reduce((sum, row) => sum + (row.pins?.waitedFor ?? 0), 0);
  const released = drained.reduce((sum, row) => sum + (row.pins?.released ?? 0), 0);
  const pulled =
    pull === null
      ? 'no pull'
      : `pulled ${pull.blocks} blocks (${pull.bytes.toLocaleString('en-US')} bytes, ${pull.verified ? 'verified' : 'NOT verified'}) in ${pull.ms.toFixed(1)} ms at ${pull.gbitPerS.toFixed(2)} Gbit/s`;
  const killed =
    killedRank === null
      ? ''
      : `killed rank: ${killedRank.recomputed} blocks recomputed, ${killedRank.committedBlocks} committed; `;
  const { calibration } = summary;
  const calibrated =
    calibration === null
      ? ''
      : `transfer estimate ${calibration.transferMs.prior.toFixed(1)} ms (prior) → ${calibration.transferMs.calibrated.toFixed(1)} ms (calibrated, measured ${calibration.transferMs.measured.toFixed(1)} ms); `;
  return (
    `kvreuse demo: ${pulled}; ${summary.decisions.map((d) => `${d.request} ${d.action} (${d.reason})`).join(', ')}; ` +
    `${calibrated}gpu reuse ${summary.gpu.active ? 'active' : 'refused'}; ${killed}${drained.length} processes drained, ${returned} banks returned, ${retained} retained, ` +
    `${waited} pin${waited === 1 ? '' : 's'} waited for (${released} released)`
  );
}
