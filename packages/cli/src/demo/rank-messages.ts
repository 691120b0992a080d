// The demo's messages between the parent and its rank processes, one JSON object per line: the parent
// writes commands to a rank's stdin, the rank reports on its stdout. Both directions are validated
// field by field; a line of a known type with a bad field is a DemoMessageError naming the field.
import type { DrainReport } from '@kvreuse/drain';
import { type MemoryKind, memoryKinds } from '@kvreuse/native-bindings';
import { type EndpointDrainReport, type VerifyMode, verifyModes } from '@kvreuse/endpoint';
import { blockHashFromHex, blockHashToHex } from '@kvreuse/inventory';
import {
  type LinkClass,
  linkClasses,
  type PullHint,
  type SourceTier,
  sourceTiers,
  type TransferReceipt,
} from '@kvreuse/router';
import { DemoMessageError } from '../errors.js';
import { type QuarantineMessage, terminalStates } from './quarantine-report.js';

export type RankRole = 'decode' | 'prefill';

/** What the prefill rank measured and checked of one pull. */
export interface PullReport {
  /** Where the pulled blocks went: the prefill rank's banks in host memory, or in GPU memory. */
  readonly memory: MemoryKind;
  readonly requested: number;
  /** The verified prefix it committed. */
  readonly blocks: number;
  readonly bytes: number;
  /** Every committed byte equals the KV content the prefix's hashes stand for. */
  readonly verified: boolean;
  /** The endpoint's checksum verification that ran (the `endpoint.verify` setting), and the blocks it compared. */
  readonly verify: VerifyMode;
  readonly checkedBlocks: number;
  readonly ms: number;
  /** Gbit/s over the pull's bytes moved. */
  readonly gbitPerS: number;
  /** Blocks recomputed (written from the prompt, not pulled), and why, in words. */
  readonly recomputed: { readonly blocks: number; readonly reasons: readonly string[] };
  /** The router's predicted TTFT saving against the one this pull measured. */
  readonly saving?: { readonly predictedMs: number; readonly measuredMs: number };
  /** The receipt's calibration input when its time prices the committed blocks (`calibrationSample`), for the router in the parent. */
  readonly calibration?: TransferReceipt;
}

/** The part of a drain report the demo prints per process. */
export interface DrainSummary {
  readonly banksReturned: number;
  readonly banksRetained: number;
  readonly quarantined: number;
  readonly agentDestroyed: boolean;
  /**
   * Readers' pins the drain waited for, and how they ended (all zero for a rank that serves none); `held`:
   * each pin held when the drain began waiting — its reader's agent, its blocks, how it ended.
   */
  readonly pins: {
    readonly waitedFor: number;
    readonly released: number;
    readonly lapsed: number;
    readonly outstanding: number;
    readonly held: readonly { readonly reader: string; readonly blocks: number; readonly ended: string }[];
  };
  readonly steps: readonly string[];
}

interface RankSaid {
  readonly role: RankRole;
  readonly tpRank: number;
}

export type RankMessage = RankSaid &
  /** `metricsUrl`: where the rank serves its endpoint's metrics, when `endpoint.metrics_port` is set. */
  (
    | { readonly type: 'published'; readonly agentName: string; readonly epoch: number; readonly metricsUrl?: string }
    | { readonly type: 'ready' }
    | { readonly type: 'allocated'; readonly slots: readonly number[] }
    | { readonly type: 'handed-off'; readonly blocks: number; readonly bytes: number; readonly ms: number }
    | { readonly type: 'retained'; readonly blocks: number; readonly verified: number; readonly appended: number }
    | { readonly type: 'armed' }
    | { readonly type: 'pulled'; readonly pull: PullReport }
    /** Prefill, on a pull that holds its pins: nothing reads them any more; they stay held until `release-pins`. */
    | { readonly type: 'holding'; readonly sources: readonly string[] }
    /** Prefill, on a pull with `stopAfterPost`: its reads are posted (`operations` of them); it stops itself next. */
    | { readonly type: 'stopping-after-post'; readonly operations: number }
    /** Decode, draining: its part and inventory are withdrawn; next it refuses new pins and waits for the held ones. */
    | { readonly type: 'waiting-for-readers' }
    | { readonly type: 'drained'; readonly drain: DrainSummary }
    | { readonly type: 'failed'; readonly message: string }
    /** An operation past its abandon deadline unfinished, and its end once proven terminal (quarantine-report.ts). */
    | QuarantineMessage
  );

/** The router's prediction the prefill rank compares its pull with. */
export interface PullPrediction {
  readonly predictedMs: number;
  readonly prefillTokenUs: number;
  readonly lookupBudgetMs: number;
}

export type RankCommand =
  /** Decode: take `count` free blocks of the pool for a hand-off. */
  | { readonly type: 'allocate'; readonly count: number }
  /** Prefill: compute the blocks of `hashes` and WRITE them into `destinationSlots` of every decode rank. */
  | { readonly type: 'hand-off'; readonly hashes: readonly string[]; readonly destinationSlots: readonly number[] }
  /** Decode: check the handed-off blocks, retain them, decode `append` more blocks; the inventory publisher announces all of them. */
  | {
      readonly type: 'retain';
      readonly slots: readonly number[];
      readonly hashes: readonly string[];
      readonly append: readonly string[];
      readonly publishInventory: boolean;
    }
  /**
   * Prefill: pull the prefix the router's hint names, verify, commit the verified prefix, recompute the
   * rest. With `holdPins`, the pins stay held once nothing reads them (`holding`) until `release-pins`.
   * With `stopAfterPost`, the rank process stops itself (SIGSTOP) right after posting the pull's reads,
   * having said `stopping-after-post`: a fault that lands while every read is in flight, for whoever
   * sends it SIGCONT. With `engineContent`, the source serves an engine's own memory: the bytes are the
   * engine's, not the demo's, and are verified by the pull's checksums only.
   */
  | {
      readonly type: 'pull';
      readonly hint: HintLine;
      readonly prediction?: PullPrediction;
      readonly holdPins?: boolean;
      readonly stopAfterPost?: boolean;
      readonly engineContent?: boolean;
    }
  /** Prefill: release the pins a `holdPins` pull holds. */
  | { readonly type: 'release-pins' }
  /** Decode: crash (SIGKILL) at the next pin request, before answering it. */
  | { readonly type: 'crash-on-pin' };

/** The router's `PullHint` on a line: the hashes as hex. */
export interface HintLine {
  readonly workerId: string;
  readonly incarnation: string;
  readonly epoch: number;
  readonly start: number;
  readonly hashes: readonly string[];
  readonly blockTokens: number;
  readonly linkClass: LinkClass;
  readonly tier: SourceTier;
}

export function hintLine(hint: PullHint): HintLine {
  const { workerId, incarnation, epoch, blockTokens, linkClass, tier } = hint;
  return {
    workerId,
    incarnation,
    epoch,
    start: hint.blocks.start,
    hashes: Array.from(hint.hashes, blockHashToHex),
    blockTokens,
    linkClass,
    tier,
  };
}

export function hintOf(line: HintLine): PullHint {
  const hashes = BigUint64Array.from(line.hashes, (hex) => blockHashFromHex(hex) as bigint);
  const { workerId, incarnation, epoch, blockTokens, linkClass, tier } = line;
  return {
    workerId,
    incarnation,
    epoch,
    blocks: { start: line.start, count: hashes.length },
    hashes,
    blockTokens,
    linkClass,
    tier,
  };
}

/** What a rank says when something it was doing failed. */
export function failure(error: unknown): { readonly type: 'failed'; readonly message: string } {
  return { type: 'failed', message: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
}

/** A drain's summary; `report.pins` is the endpoint's list of the pins waited for (`close()`'s report has it). */
export function drainSummary(
  report: DrainReport & Partial<Pick<EndpointDrainReport, 'pins'>>,
  agentDestroyed: boolean,
): DrainSummary {
  const { released = 0, lapsed = 0, outstanding = 0 } = report.readers ?? {};
  const held = (report.pins ?? []).map((pin) => ({
    reader: pin.readerAgent,
    blocks: pin.blocks,
    ended: pin.ended ?? 'held',
  }));
  return {
    banksReturned: report.banksReturned.length,
    banksRetained: report.banksRetained.length,
    quarantined: report.quarantined.length,
    agentDestroyed,
    pins: { waitedFor: released + lapsed + outstanding, released, lapsed, outstanding, held },
    steps: report.steps.map((step) => `${step.step}: ${step.outcome}`),
  };
}

// Field checks: each returns why the value is wrong, or undefined when it is right.
type Check = (value: unknown) => string | undefined;
const count: Check = (value) =>
  Number.isSafeInteger(value) && (value as number) >= 0 ? undefined : 'must be a whole number ≥ 0';
const number: Check = (value) =>
  typeof value === 'number' && Number.isFinite(value) ? undefined : 'must be a finite number';
const text: Check = (value) => (typeof value === 'string' ? undefined : 'must be a string');
const flag: Check = (value) => (typeof value === 'boolean' ? undefined : 'must be a boolean');
const hex: Check = (value) =>
  typeof value === 'string' && /^[0-9a-f]{16}$/.test(value) ? undefined : 'must be a 16-digit hex block hash';
const list =
  (item: Check): Check =>
  (value) => {
    if (!Array.isArray(value)) return 'must be an array';
    for (const [index, element] of value.entries()) {
      const why = item(element);
      if (why !== undefined) return `[${index}]${/^[.[]/.test(why) ? '' : ' '}${why}`;
    }
    return undefined;
  };
const object =
  (fields: Record<string, Check>, optional: readonly string[] = []): Check =>
  (value) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'must be an object';
    for (const [name, check] of Object.entries(fields)) {
      const field = (value as Record<string, unknown>)[name];
      if (field === undefined && optional.includes(name)) continue;
      const why = check(field);
      if (why !== undefined) return `.${name}${/^[.[]/.test(why) ? '' : ' '}${why}`;
    }
    return undefined;
  };
const oneOf =
  (values: readonly string[]): Check =>
  (value) =>
    values.includes(value as string) ? undefined : `must be one of ${values.join(', ')}`;
const optional =
  (check: Check): Check =>
  (value) =>
    value === undefined ? undefined : check(value);
const role: Check = (value) =>
  value === 'decode' || value === 'prefill' ? undefined : "must be 'decode' or 'prefill'";

const said = { role, tpRank: count };
const messageFields: Record<RankMessage['type'], Record<string, Check>> = {
  published: { ...said, agentName: text, epoch: count, metricsUrl: optional(text) },
  ready: said,
  allocated: { ...said, slots: list(count) },
  'handed-off': { ...said, blocks: count, bytes: count, ms: number },
  retained: { ...said, blocks: count, verified: count, appended: count },
  armed: said,
  holding: { ...said, sources: list(text) },
  'stopping-after-post': { ...said, operations: count },
  'waiting-for-readers': said,
  pulled: {
    ...said,
    pull: object(
      {
        memory: oneOf(memoryKinds),
        requested: count,
        blocks: count,
        bytes: count,
        verified: flag,
        verify: oneOf(verifyModes),
        checkedBlocks: count,
        ms: number,
        gbitPerS: number,
        recomputed: object({ blocks: count, reasons: list(text) }),
        saving: object({ predictedMs: number, measuredMs: number }),
        calibration: object({
          linkClass: oneOf(linkClasses),
          tier: oneOf(sourceTiers),
          blocks: count,
          bytes: count,
          transferMs: number,
        }),
      },
      ['saving', 'calibration'],
    ),
  },
  drained: {
    ...said,
    drain: object({
      banksReturned: count,
      banksRetained: count,
      quarantined: count,
      agentDestroyed: flag,
      pins: object({
        waitedFor: count,
        released: count,
        lapsed: count,
        outstanding: count,
        held: list(object({ reader: text, blocks: count, ended: text })),
      }),
      steps: list(text),
    }),
  },
  failed: { ...said, message: text },
  quarantined: { ...said, operation: text, banks: count, banksRetained: count },
  quiesced: {
    ...said,
    operation: text,
    terminal: oneOf(terminalStates),
    code: optional(text),
    bytesDone: count,
    banksRetained: count,
  },
};
const commandFields: Record<RankCommand['type'], Record<string, Check>> = {
  allocate: { count },
  'hand-off': { hashes: list(hex), destinationSlots: list(count) },
  retain: { slots: list(count), hashes: list(hex), append: list(hex), publishInventory: flag },
  pull: {
    hint: object({
      workerId: text,
      incarnation: text,
      epoch: count,
      start: count,
      hashes: list(hex),
      blockTokens: count,
      linkClass: oneOf(linkClasses),
      tier: oneOf(sourceTiers),
    }),
    prediction: optional(object({ predictedMs: number, prefillTokenUs: number, lookupBudgetMs: number })),
    holdPins: optional(flag),
    stopAfterPost: optional(flag),
    engineContent: optional(flag),
  },
  'release-pins': {},
  'crash-on-pin': {},
};

function validated<T>(value: Record<string, unknown>, fields: Record<string, Check>, what: string): T {
  const why = object(fields)(value);
  if (why !== undefined) throw new DemoMessageError(`${what} "${String(value['type'])}"`, why);
  return value as T;
}

export function encodeRankMessage(message: RankMessage): string {
  return `${JSON.stringify(message)}\n`;
}

export function encodeRankCommand(command: RankCommand): string {
  return `${JSON.stringify(command)}\n`;
}

/**
 * A line a rank process wrote: its message, or undefined for a line that is not one (a log line of the
 * process). A line of a message type with a bad field throws DemoMessageError.
 */
export function parseRankMessage(line: string): RankMessage | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (
    typeof value !== 'object' ||
    value === null ||
    !Object.hasOwn(messageFields, (value as { type?: unknown }).type as string)
  )
    return undefined;
  const record = value as Record<string, unknown>;
  return validated<RankMessage>(record, messageFields[record['type'] as RankMessage['type']], 'rank message');
}

/** A command line the parent wrote; DemoMessageError for anything else. */
export function parseRankCommand(line: string): RankCommand {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new DemoMessageError('command line', `is not JSON: ${JSON.stringify(line.slice(0, 80))}`);
  }
  const type = (value as { type?: unknown } | null)?.type;
  if (typeof value !== 'object' || value === null || !Object.hasOwn(commandFields, type as string)) {
    throw new DemoMessageError(
      'command type',
      `must be one of ${Object.keys(commandFields).join(', ')}; got ${JSON.stringify(type)}`,
    );
  }
  return validated<RankCommand>(
    value as Record<string, unknown>,
    commandFields[type as RankCommand['type']],
    'command',
  );
}
