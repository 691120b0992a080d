import { describeValue, messageOf } from '@kvreuse/errors';
import { CalibrationClockError, ReceiptError, RouterOptionError } from './errors.js';
import { type LinkClass, linkClasses } from './sources.js';

/** Where a pull's blocks lay at the source: all on the GPU, all in host memory, or some on each. */
export type SourceTier = 'gpu' | 'host' | 'mixed';
export const sourceTiers: readonly SourceTier[] = ['gpu', 'host', 'mixed'];

/** What one pull measured, as the endpoint reports it. */
export interface TransferReceipt {
  readonly linkClass: LinkClass;
  readonly tier: SourceTier;
  /** Blocks moved. */
  readonly blocks: number;
  readonly bytes: number;
  /** Measured transfer time, from posting to quiescence. */
  readonly transferMs: number;
  /** The destination's measured prefill time per token, when it knows it. */
  readonly prefillTokenUs?: number;
}

/** A fitted transfer cost: `fixedMs + blocks × blockUs / 1000`. */
export interface TransferFit {
  readonly fixedMs: number;
  readonly blockUs: number;
  /** 0–1: how far the fit can be trusted (receipts counted, spread of the residuals). */
  readonly confidence: number;
  /** Receipts in the fit (those not aged out). */
  readonly receipts: number;
}

export interface PrefillFit {
  readonly tokenUs: number;
  readonly confidence: number;
  readonly receipts: number;
}

export interface CalibrationOptions {
  /**
   * Monotonic milliseconds (default `performance.now`): receipts age out against it. A reading that
   * throws, calls back into the calibration, is not a finite number or is less than an earlier one is
   * refused with `CalibrationClockError`, and the call changes nothing.
   */
  readonly now?: () => number;
  /** Receipts older than this no longer count (default 60,000 ms): when receipts stop, the priors return. */
  readonly maxAgeMs?: number;
  /** The newest receipts kept per link class and tier (default 64). */
  readonly window?: number;
  /**
   * Receipts needed before a fit is used (default 8). 1 trusts a single receipt — its time per block,
   * through the origin — e.g. a router that has seen one pull of a fleet whose pulls do not vary.
   */
  readonly minReceipts?: number;
  /** The largest root-mean-square residual, relative to the mean, of a fit that is used (default 0.25). */
  readonly maxRelativeError?: number;
}

interface Sample {
  readonly at: number;
  readonly x: number;
  readonly y: number;
}

/**
 * Estimates from receipts what transfers and prefill actually cost: per link class and tier, a fixed
 * cost per transfer and a cost per block (least squares over the newest receipts), and the prefill time
 * per token. A fit is offered only once confident — enough receipts, none older than `maxAgeMs`, and
 * residuals within `maxRelativeError` — so that when receipts stop the router falls back to its priors.
 */
export class TransferCalibration {
  private readonly now: () => number;
  private readonly maxAgeMs: number;
  private readonly window: number;
  private readonly minReceipts: number;
  private readonly maxRelativeError: number;
  private readonly transfers = new Map<string, Sample[]>();
  private readonly prefill: Sample[] = [];
  private readingClock = false;
  private latestReading = -Infinity;

  constructor(options: CalibrationOptions = {}) {
    if (options === null || typeof options !== 'object') throw new RouterOptionError('options', options, 'an object');
    const {
      now = () => performance.now(),
      maxAgeMs = 60_000,
      window = 64,
      minReceipts = 8,
      maxRelativeError = 0.25,
    } = options;
    if (typeof now !== 'function')
      throw new RouterOptionError('options.now', now, 'a function returning monotonic milliseconds');
    if (!(typeof maxAgeMs === 'number' && maxAgeMs > 0))
      throw new RouterOptionError('options.maxAgeMs', maxAgeMs, 'a number > 0');
    if (!(Number.isSafeInteger(minReceipts) && minReceipts >= 1))
      throw new RouterOptionError('options.minReceipts', minReceipts, 'a whole number ≥ 1');
    if (!(Number.isSafeInteger(window) && window >= minReceipts))
      throw new RouterOptionError('options.window', window, `a whole number ≥ minReceipts (${minReceipts})`);
    if (!(typeof maxRelativeError === 'number' && maxRelativeError > 0))
      throw new RouterOptionError('options.maxRelativeError', maxRelativeError, 'a number > 0');
    this.now = now;
    this.maxAgeMs = maxAgeMs;
    this.window = window;
    this.minReceipts = minReceipts;
    this.maxRelativeError = maxRelativeError;
  }

  /** Records one pull's receipt; a receipt of the wrong shape is refused whole. */
  record(receipt: TransferReceipt): void {
    checkReceipt(receipt);
    const at = this.readClock();
    const key = `${receipt.linkClass}/${receipt.tier}`;
    const samples = this.transfers.get(key) ?? [];
    this.transfers.set(key, samples);
    push(samples, { at, x: receipt.blocks, y: receipt.transferMs }, this.window);
    if (receipt.prefillTokenUs !== undefined) push(this.prefill, { at, x: 1, y: receipt.prefillTokenUs }, this.window);
  }

  /** The fitted transfer cost of a link class and tier, whether confident or not; undefined without receipts. */
  transferFit(linkClass: LinkClass, tier: SourceTier): TransferFit | undefined {
    const samples = this.fresh(this.transfers.get(`${linkClass}/${tier}`));
    if (samples.length === 0) return undefined;
    const n = samples.length;
    let sx = 0;
    let sy = 0;
    let sxx = 0;
    let sxy = 0;
    for (const { x, y } of samples) {
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
    }
    const spread = n * sxx - sx * sx;
    let slope = spread > 0 ? (n * sxy - sx * sy) / spread : sxy / sxx;
    let fixed = spread > 0 ? (sy - slope * sx) / n : 0;
    // A negative fixed cost is noise: fit through the origin instead.
    if (fixed < 0) {
      fixed = 0;
      slope = sxy / sxx;
    }
    slope = Math.max(0, slope);
    return {
      fixedMs: fixed,
      blockUs: slope * 1000,
      receipts: n,
      confidence: this.confidence(samples, (x) => fixed + slope * x),
    };
  }

  /** The confident transfer fit of a link class and tier, or undefined (then the priors apply). */
  transferEstimate(linkClass: LinkClass, tier: SourceTier): TransferFit | undefined {
    const fit = this.transferFit(linkClass, tier);
    return fit !== undefined && fit.confidence > 0 ? fit : undefined;
  }

  /** The measured prefill time per token, whether confident or not; undefined without receipts that carry it. */
  prefillFit(): PrefillFit | undefined {
    const samples = this.fresh(this.prefill);
    if (samples.length === 0) return undefined;
    const mean = samples.reduce((sum, { y }) => sum + y, 0) / samples.length;
    return { tokenUs: mean, receipts: samples.length, confidence: this.confidence(samples, () => mean) };
  }

  /** The confident prefill time per token, or undefined (then the prior applies). */
  prefillEstimate(): PrefillFit | undefined {
    const fit = this.prefillFit();
    return fit !== undefined && fit.confidence > 0 ? fit : undefined;
  }

  /** The samples not aged out, dropping the rest for good. */
  private fresh(samples: Sample[] | undefined): Sample[] {
    if (samples === undefined) return [];
    const oldest = this.readClock() - this.maxAgeMs;
    let stale = 0;
    while (stale < samples.length && samples[stale]!.at < oldest) stale++;
    if (stale > 0) samples.splice(0, stale);
    return samples;
  }

  /**
   * The clock's reading, refused before anything changes unless it keeps the samples in the order
   * aging relies on (oldest first); a call back into the calibration from the clock is refused too.
   */
  private readClock(): number {
    if (this.readingClock)
      throw new CalibrationClockError('re-entered', undefined, 'it called back into the calibration while being read');
    this.readingClock = true;
    let reading: unknown;
    try {
      reading = this.now();
    } catch (error) {
      // A call back refused inside the clock, passed on by it: that is what went wrong.
      if (error instanceof CalibrationClockError) throw error;
      const message = messageOf(error);
      throw new CalibrationClockError('threw', undefined, `it threw: ${message}`, { cause: error });
    } finally {
      this.readingClock = false;
    }
    if (typeof reading !== 'number' || !Number.isFinite(reading))
      throw new CalibrationClockError(
        'not-finite',
        reading,
        `it read ${describeValue(reading)}, not a finite number of milliseconds`,
      );
    if (reading < this.latestReading)
      throw new CalibrationClockError(
        'went-back',
        reading,
        `it read ${reading} after ${this.latestReading}: monotonic milliseconds never go back`,
      );
    this.latestReading = reading;
    return reading;
  }

  /**
   * 0 below `minReceipts` or past `maxRelativeError`; otherwise it rises with the receipts counted
   * (half at `minReceipts`, towards 1) and falls with the relative residual.
   */
  private confidence(samples: readonly Sample[], predict: (x: number) => number): number {
    const n = samples.length;
    if (n < this.minReceipts) return 0;
    let squares = 0;
    let total = 0;
    for (const { x, y } of samples) {
      squares += (y - predict(x)) ** 2;
      total += y;
    }
    const mean = total / n;
    const relativeError = mean > 0 ? Math.sqrt(squares / n) / mean : 0;
    if (relativeError > this.maxRelativeError) return 0;
    return (n / (n + this.minReceipts)) * (1 - relativeError / this.maxRelativeError / 2);
  }
}

function push(samples: Sample[], sample: Sample, window: number): void {
  samples.push(sample);
  if (samples.length > window) samples.splice(0, samples.length - window);
}

function checkReceipt(receipt: TransferReceipt): void {
  if (receipt === null || typeof receipt !== 'object') throw new ReceiptError('receipt', receipt, 'an object');
  if (!linkClasses.includes(receipt.linkClass))
    throw new ReceiptError('linkClass', receipt.linkClass, `one of ${linkClasses.join(', ')}`);
  if (!sourceTiers.includes(receipt.tier))
    throw new ReceiptError('tier', receipt.tier, `one of ${sourceTiers.join(', ')}`);
  if (!(Number.isSafeInteger(receipt.blocks) && receipt.blocks >= 1))
    throw new ReceiptError('blocks', receipt.blocks, 'a whole number ≥ 1');
  if (!(Number.isSafeInteger(receipt.bytes) && receipt.bytes >= 0))
    throw new ReceiptError('bytes', receipt.bytes, 'a whole number ≥ 0');
  if (!(Number.isFinite(receipt.transferMs) && receipt.transferMs >= 0))
    throw new ReceiptError('transferMs', receipt.transferMs, 'a finite number ≥ 0');
  const { prefillTokenUs } = receipt;
  if (prefillTokenUs !== undefined && !(Number.isFinite(prefillTokenUs) && prefillTokenUs > 0)) {
    throw new ReceiptError('prefillTokenUs', prefillTokenUs, 'a finite number > 0, or absent');
  }
}
