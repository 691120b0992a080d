// What a demo rank process tells its parent: one JSON object per line on stdout.
import type { DrainReport } from '@kvreuse/drain';

export type RankRole = 'decode' | 'prefill';

export type RankMessage =
  | { readonly type: 'published'; readonly role: RankRole; readonly tpRank: number; readonly agentName: string; readonly epoch: number }
  | { readonly type: 'ready'; readonly role: RankRole; readonly tpRank: number }
  | { readonly type: 'drained'; readonly role: RankRole; readonly tpRank: number; readonly drain: DrainSummary }
  | { readonly type: 'failed'; readonly role: RankRole; readonly tpRank: number; readonly message: string };

/** The part of a drain report the demo prints per process. */
export interface DrainSummary {
  readonly banksReturned: number;
  readonly banksRetained: number;
  readonly quarantined: number;
  readonly agentDestroyed: boolean;
  readonly steps: readonly string[];
}

export function drainSummary(report: DrainReport, agentDestroyed: boolean): DrainSummary {
  return {
    banksReturned: report.banksReturned.length,
    banksRetained: report.banksRetained.length,
    quarantined: report.quarantined.length,
    agentDestroyed,
    steps: report.steps.map((step) => `${step.step}: ${step.outcome}`),
  };
}

export function encodeRankMessage(message: RankMessage): string {
  return `${JSON.stringify(message)}\n`;
}

const types = new Set(['published', 'ready', 'drained', 'failed']);

/** A line a rank process wrote, or undefined for a line that is not one of its messages. */
export function parseRankMessage(line: string): RankMessage | undefined {
  try {
    const value: unknown = JSON.parse(line);
    if (typeof value === 'object' && value !== null && types.has((value as { type?: unknown }).type as string)) return value as RankMessage;
  } catch {
    // not a message: a log line of the process
  }
  return undefined;
}
