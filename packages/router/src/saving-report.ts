import type { routerGroup } from './settings.js';
import type { SettingsOf } from '@kvreuse/config';
import type { TransferReceipt } from './calibration.js';
import type { EstimateKind } from './cost-model.js';
import type { RouteDecision } from './decide.js';
import { isObject, ReceiptError, RouterOptionError } from './errors.js';

/** One pull: the saving its decision predicted against the saving its receipt measured. */
export interface SavingRow {
  readonly source: string;
  readonly extent: number;
  /** Blocks the receipt says moved (fewer than the extent when the pull verified only part). */
  readonly blocksMoved: number;
  readonly estimate: EstimateKind;
  /** `savingMs − costMs` of the decision. */
  readonly predictedMs: number;
  /** Prefill time of the blocks moved (measured per token when the receipt says, else the prior) minus the measured transfer time and the lookup budget. */
  readonly measuredMs: number;
}

/**
 * Predicted against measured saving, per pull decision: what a `kvreuse`-level report shows to tell
 * whether the cost model (prior or calibrated) is right.
 */
export class SavingReport {
  private readonly entries: SavingRow[] = [];

  constructor(private readonly router: SettingsOf<[typeof routerGroup]>['router']) {
    if (!isObject(router)) throw new RouterOptionError('router', router, "the resolved settings' router group");
  }

  /** Adds a pull decision and the receipt of its pull. */
  add(decision: RouteDecision, receipt: TransferReceipt): SavingRow {
    if (!isObject(decision)) throw new RouterOptionError('decision', decision, 'a RouteDecision of decide');
    const source = decision.source;
    if (decision.action !== 'pull' || source === undefined)
      throw new RouterOptionError('decision', decision.reason, 'a pull decision: only a pull has a receipt');
    if (!isObject(receipt)) throw new ReceiptError('receipt', receipt, 'an object');
    if (!(Number.isSafeInteger(receipt.blocks) && receipt.blocks >= 0 && receipt.blocks <= decision.extent)) {
      throw new ReceiptError(
        'blocks',
        receipt.blocks,
        `a whole number from 0 to the decision's extent, ${decision.extent}`,
      );
    }
    if (!(Number.isFinite(receipt.transferMs) && receipt.transferMs >= 0))
      throw new ReceiptError('transferMs', receipt.transferMs, 'a finite number ≥ 0');
    const { prefillTokenUs } = receipt;
    if (prefillTokenUs !== undefined && !(Number.isFinite(prefillTokenUs) && prefillTokenUs > 0)) {
      throw new ReceiptError('prefillTokenUs', prefillTokenUs, 'a finite number > 0, or absent');
    }
    const tokenUs = prefillTokenUs ?? this.router.transferSourcePrefillTokenUs;
    const row: SavingRow = {
      source: source.workerId,
      extent: decision.extent,
      blocksMoved: receipt.blocks,
      estimate: decision.estimate,
      predictedMs: decision.savingMs - decision.costMs,
      measuredMs:
        (receipt.blocks * source.blockTokens * tokenUs) / 1000 -
        receipt.transferMs -
        this.router.transferSourceLookupBudgetMs,
    };
    this.entries.push(row);
    return row;
  }

  rows(): readonly SavingRow[] {
    return this.entries;
  }

  /** A text table, one pull a line, with the mean error of the predictions at the end. */
  render(): string {
    const format = (ms: number): string => ms.toFixed(3);
    const lines = ['source | extent | moved | estimate | predicted ms | measured ms | error ms'];
    for (const row of this.entries) {
      const error = row.predictedMs - row.measuredMs;
      lines.push(
        `${row.source} | ${row.extent} | ${row.blocksMoved} | ${row.estimate} | ${format(row.predictedMs)} | ${format(row.measuredMs)} | ${format(error)}`,
      );
    }
    const n = this.entries.length;
    const meanError =
      n === 0 ? 0 : this.entries.reduce((sum, row) => sum + Math.abs(row.predictedMs - row.measuredMs), 0) / n;
    lines.push(`${n} pulls, mean absolute error ${format(meanError)} ms`);
    return `${lines.join('\n')}\n`;
  }
}
