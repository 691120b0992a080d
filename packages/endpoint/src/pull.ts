// The destination side of a pull: one template post per rank pair on pinned source blocks, wait for
// quiescence, verify each block per pair, commit the longest verified prefix, release the pins.
import {
  type LedgerOperation,
  type LedgerPostRequest,
  OperationFailedError,
  type OperationLedger,
  type PeerTicket,
} from '@kvreuse/drain';
import { codeOf, messageOf } from '@kvreuse/errors';
import type { Agent, PostBlocksRequest, RegisteredTemplate } from '@kvreuse/native-bindings';
import type { Bank } from '@kvreuse/registry';
import type { LinkClass, SourceTier } from '@kvreuse/router';
import type { RankBankBytes } from './block-checksum.js';
import { EndpointOptionError } from './errors.js';
import { sideChecksums } from './side-checksums.js';
import { type PullPhases, type PullReceipt, PullShortfallError, type RecomputeReason } from './pull-receipt.js';
import { type SavingPrediction, type ShortfallPolicy, type VerifyMode, verifyModes } from './pull-request.js';
import { type BeforeRelease, type HeldPin, type PinLoss, releasePins } from './pins.js';
import { sameRank } from './ranks.js';

/** One rank pair of the pull, as the destination rank holding it sees it. */
export interface PullPair {
  /** The pair's template, registered on the ledger's agent for reading from the pair's source rank. */
  readonly template: RegisteredTemplate;
  /** The source rank's peer, as the work was prepared for it. */
  readonly ticket: PeerTicket;
  /** The destination banks the pair writes (each referenced by the ledger while the operation runs). */
  readonly banks: readonly Bank[];
  /** The destination rank's bank bytes, indexed by bank number, to verify what arrived. */
  readonly bytes: RankBankBytes;
}

export interface PullOptions {
  readonly ledger: OperationLedger<LedgerPostRequest, PostBlocksRequest>;
  readonly pairs: readonly PullPair[];
  /** The pin granted by each source rank the pairs read from. */
  readonly pins: readonly HeldPin[];
  /** Where each block of the prefix goes, in prefix order. */
  readonly destinationBlocks: Uint32Array;
  readonly verify: VerifyMode;
  /** The destination rank's agent: it sums vram banks on the GPU (`sideChecksums`). */
  readonly agent?: Pick<Agent, 'blockChecksums'>;
  /** Under `sampled`: check every `sampleEvery`-th block and the last one (default 8). */
  readonly sampleEvery?: number;
  readonly policy: ShortfallPolicy;
  readonly link: { readonly linkClass: LinkClass; readonly tier: SourceTier };
  readonly prediction?: SavingPrediction;
  /** Called with the pins once nothing reads them, before they are released (`PullRequest.beforeRelease`). */
  readonly beforeRelease?: BeforeRelease;
  /**
   * Takes the pins' release (`beforeRelease`, then each pin given back) instead of the pull waiting for it: the
   * pull then resolves once verified, and `released` once the sources answered (it never rejects). Not
   * called when a read was quarantined: its pins go back when it ends.
   */
  readonly onReleasing?: (released: Promise<void>) => void;
  /** Milliseconds, for the receipt's times (default `performance.now`). */
  readonly now?: () => number;
}

const defaultSampleEvery = 8;

interface Posted {
  readonly pair: number;
  readonly operation: LedgerOperation;
}

/** The checks of the caller's own options, which a request to `ReuseEndpoint.pull` has passed already. */
function checkOptions(options: PullOptions): void {
  if (options === null || typeof options !== 'object')
    throw new EndpointOptionError('options', options, 'must be an object');
  if (!verifyModes.includes(options.verify))
    throw new EndpointOptionError('verify', options.verify, "must be 'full', 'sampled' or 'off'");
  if (!['fail', 'recompute'].includes(options.policy))
    throw new EndpointOptionError('policy', options.policy, "must be 'fail' or 'recompute'");
  if (!(options.destinationBlocks instanceof Uint32Array))
    throw new EndpointOptionError('destinationBlocks', options.destinationBlocks, 'must be a Uint32Array');
  const sampleEvery = options.sampleEvery ?? defaultSampleEvery;
  if (!Number.isSafeInteger(sampleEvery) || sampleEvery < 1)
    throw new EndpointOptionError('sampleEvery', sampleEvery, 'must be a positive integer');
}

/** The pin of each pair's source rank: every pair needs one, with checksums unless verification is off. */
function pairPins(options: PullOptions): HeldPin[] {
  if (!Array.isArray(options.pairs) || options.pairs.length === 0)
    throw new EndpointOptionError('pairs', options.pairs, 'must list at least one rank pair');
  return options.pairs.map(({ template }, index) => {
    const route = template.template.pairs[template.pair];
    const pin =
      route === undefined ? undefined : options.pins.find((held) => sameRank(held.source.rank, route.sourceRank));
    if (route === undefined || pin === undefined) {
      throw new EndpointOptionError(
        `pairs[${index}]`,
        template.pair,
        'has no pin from its source rank among options.pins',
      );
    }
    if (options.verify !== 'off' && !(pin.checksums instanceof Uint32Array)) {
      throw new EndpointOptionError(
        `pins (${pin.pinId})`,
        undefined,
        `carry no checksums, yet verify is '${options.verify}'`,
      );
    }
    return pin;
  });
}

/** The blocks of `0 … count − 1` to check under `mode`. */
function checkedPositions(mode: VerifyMode, count: number, sampleEvery: number): number[] {
  if (mode === 'off' || count === 0) return [];
  const all = Array.from({ length: count }, (_, i) => i);
  return mode === 'full' ? all : all.filter((i) => i % sampleEvery === 0 || i === count - 1);
}

/** Resolves once the operation is quiescent, or quarantined (then its quiescence comes later, if ever). */
function quiescentOrQuarantined(
  ledger: PullOptions['ledger'],
  operation: LedgerOperation,
): Promise<'quiescent' | 'quarantined'> {
  return new Promise((resolve) => {
    const stop = ledger.on('quarantined', (quarantined) => {
      if (quarantined !== operation) return;
      stop();
      resolve('quarantined');
    });
    void operation.quiescence.then(() => {
      stop();
      resolve('quiescent');
    });
  });
}

/**
 * Pulls the pinned prefix: posts one template operation per rank pair through the ledger, waits until
 * every operation is quiescent (or quarantined), verifies each block's checksum per pair and returns
 * the longest prefix whose every earlier block and every pair's piece verified, with what to recompute
 * and why. The pins are released once nothing reads them — after a failure too; a quarantined
 * operation's pins are released only when it turns quiescent. Under `fail` a shortfall throws
 * `PullShortfallError` carrying the receipt.
 */
export function pullPrefix(options: PullOptions): Promise<PullReceipt> {
  try {
    checkOptions(options);
  } catch (error) {
    return Promise.reject(error);
  }
  return pullPinned(options);
}

/** `pullPrefix` for options checked already (`ReuseEndpoint.pull` checks its request once, at its entry). */
export async function pullPinned(options: PullOptions): Promise<PullReceipt> {
  const pins = pairPins(options);
  const sampleEvery = options.sampleEvery ?? defaultSampleEvery;
  const { ledger, destinationBlocks } = options;
  const now = options.now ?? (() => performance.now());
  const requested = destinationBlocks.length;
  const reasons: RecomputeReason[] = [];
  const uniquePins = [...new Set(pins)];
  const losses = new Map<HeldPin, PinLoss>();
  const posted: Posted[] = [];
  // A lost pin makes the whole prefix recomputed: the reads still running are given up on at once
  // instead of being waited for (a stopped source's until the operation timeout).
  for (const pin of uniquePins) {
    void pin.lost.then((loss) => {
      losses.set(pin, loss);
      for (const { operation } of posted) ledger.cancel(operation, `pin lost: ${loss.detail}`);
    });
  }

  const granted = grantedBlocks(uniquePins, requested, reasons);

  const started = now();
  if (granted > 0) postPairs(options, pins, granted, posted, reasons);

  const endings = await Promise.all(posted.map(({ operation }) => quiescentOrQuarantined(ledger, operation)));
  const ms = now() - started;
  const quarantined = posted
    .filter((_, i) => endings[i] === 'quarantined')
    .map(({ operation }) => operation.quiescence);
  // Every reading operation is quiescent (or, if quarantined, released later on its quiescence). The
  // release goes out now and is waited for after the verification, which reads only this rank's memory and
  // the checksums the grants carried: the sources answer while this rank sums what it read.
  const released = Promise.all(quarantined).then(() => releasePins(uniquePins, options.beforeRelease));

  let bytesMoved = 0;
  for (const { pair, operation } of posted) {
    const outcome = await operation.outcome;
    if (outcome.ok) {
      bytesMoved += outcome.bytesDone;
    } else {
      const { error } = outcome;
      const code = error instanceof OperationFailedError ? error.nativeCode : error.code;
      reasons.push({ kind: 'operation-failed', fromBlock: 0, pair, code, detail: error.message });
    }
  }
  recordPinLosses(uniquePins, losses, reasons);

  const checked = checkedPositions(
    options.verify,
    reasons.some((reason) => reason.fromBlock === 0) ? 0 : granted,
    sampleEvery,
  );
  const verifying = now();
  const checkedBlocks = checked.length === 0 ? 0 : verifyPairs(options, pins, checked, granted, reasons);
  const verified = now();
  const waits = quarantined.length === 0 && options.onReleasing === undefined;
  if (waits) await released;
  else if (quarantined.length === 0) options.onReleasing?.(released);
  const phases = { verifyMs: verified - verifying, releaseMs: waits ? now() - verified : 0 };

  reasons.sort((a, b) => a.fromBlock - b.fromBlock);
  const blocks = Math.min(granted, ...reasons.map((reason) => reason.fromBlock));
  const receipt = receiptOf(options, { requested, blocks, bytesMoved, ms, phases, checkedBlocks, reasons });
  if (options.policy === 'fail' && blocks < requested) throw new PullShortfallError(receipt);
  return receipt;
}

/** The receipt of a pull that committed the first `blocks` of the `requested`, with what to recompute and why. */
function receiptOf(
  options: PullOptions,
  pulled: {
    readonly requested: number;
    readonly blocks: number;
    readonly bytesMoved: number;
    readonly ms: number;
    readonly phases: PullPhases;
    readonly checkedBlocks: number;
    readonly reasons: readonly RecomputeReason[];
  },
): PullReceipt {
  const { requested, blocks, bytesMoved, ms, phases, checkedBlocks, reasons } = pulled;
  const blockBytes = Number(options.pairs[0]?.template.template.blockBytes ?? 0n);
  return {
    requested,
    blocks,
    bytes: blocks * blockBytes,
    bytesMoved,
    ms,
    phases,
    gbytesPerS: ms > 0 ? bytesMoved / (ms * 1e6) : 0,
    verify: options.verify,
    checkedBlocks,
    recomputed: { fromBlock: blocks, blocks: requested - blocks, reasons },
    calibration: {
      linkClass: options.link.linkClass,
      tier: options.link.tier,
      blocks,
      bytes: blocks * blockBytes,
      transferMs: ms,
    },
    ...(options.prediction === undefined ? {} : { saving: savingOf(options.prediction, blocks, ms) }),
  };
}

/** The blocks every pin covers: a pin granting fewer than requested shortens the prefix, its reason recorded. */
function grantedBlocks(pins: readonly HeldPin[], requested: number, reasons: RecomputeReason[]): number {
  let granted = requested;
  for (const pin of pins) {
    if (pin.positions.count >= requested) continue;
    granted = Math.min(granted, pin.positions.count);
    reasons.push({
      kind: 'pin-granted-fewer',
      fromBlock: pin.positions.count,
      sourceRank: pin.source.rank,
      granted: pin.positions.count,
    });
  }
  return granted;
}

/** Records a `pin-lost` reason for each pin lost so far. */
function recordPinLosses(
  pins: readonly HeldPin[],
  losses: ReadonlyMap<HeldPin, PinLoss>,
  reasons: RecomputeReason[],
): void {
  for (const pin of pins) {
    const loss = losses.get(pin);
    if (loss !== undefined)
      reasons.push({
        kind: 'pin-lost',
        fromBlock: 0,
        sourceRank: pin.source.rank,
        reason: loss.reason,
        detail: loss.detail,
      });
  }
}

/** Posts one operation per rank pair on the first `granted` blocks; a refused post ends the posting, its reason recorded. */
function postPairs(
  options: PullOptions,
  pins: readonly HeldPin[],
  granted: number,
  posted: Posted[],
  reasons: RecomputeReason[],
): void {
  const { ledger, destinationBlocks } = options;
  for (const [index, pair] of options.pairs.entries()) {
    const pin = pins[index] as HeldPin;
    try {
      const operation = ledger.postBlocks(
        {
          template: pair.template,
          sourceBlocks: pin.sourceBlocks.subarray(0, granted),
          destinationBlocks: destinationBlocks.subarray(0, granted),
        },
        { ticket: pair.ticket, banks: pair.banks },
      );
      posted.push({ pair: index, operation });
    } catch (error) {
      reasons.push({
        kind: 'operation-failed',
        fromBlock: 0,
        pair: index,
        code: codeOf(error) ?? 'UNKNOWN',
        detail: messageOf(error),
      });
      break;
    }
  }
}

/**
 * Compares the checksums of the `checked` positions on every pair with the source's, recording the
 * first mismatch of each pair; returns how many checked positions come before the first bad block.
 */
function verifyPairs(
  options: PullOptions,
  pins: readonly HeldPin[],
  checked: readonly number[],
  granted: number,
  reasons: RecomputeReason[],
): number {
  const positions = Uint32Array.from(checked);
  const blocks = positions.map((position) => options.destinationBlocks[position] as number);
  for (const [index, pair] of options.pairs.entries()) {
    const expected = (pins[index] as HeldPin).checksums as Uint32Array;
    const { bytes, banks } = pair;
    const source = { bytes, banks, ...(options.agent === undefined ? {} : { agent: options.agent }) };
    const actual = sideChecksums(pair.template.template, pair.template.pair, 'destination', source, blocks);
    const bad = actual.findIndex((sum, i) => sum !== expected[positions[i] as number]);
    if (bad < 0) continue;
    const fromBlock = positions[bad] as number;
    reasons.push({
      kind: 'checksum-mismatch',
      fromBlock,
      pair: index,
      expected: expected[fromBlock] as number,
      actual: actual[bad] as number,
    });
  }
  const firstBad = Math.min(granted, ...reasons.map((reason) => reason.fromBlock));
  return checked.filter((position) => position < firstBad).length;
}

function savingOf(
  prediction: SavingPrediction,
  blocks: number,
  ms: number,
): { predictedMs: number; measuredMs: number } {
  return {
    predictedMs: prediction.predictedMs,
    measuredMs: (blocks * prediction.blockTokens * prediction.prefillTokenUs) / 1000 - ms - prediction.lookupBudgetMs,
  };
}
