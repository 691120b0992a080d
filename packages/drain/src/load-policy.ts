import type { drainGroup } from './settings.js';
import type { SettingsOf } from '@kvreuse/config';
import { InvalidDrainOptionError, LoadFailedError } from './errors.js';
import { checkFunction, checkOptionsObject } from './options.js';
import type { OperationOutcome, Quiescence } from './ledger.js';

export type FailedLoadPolicy = SettingsOf<[typeof drainGroup]>['drain']['failedLoadPolicy'];

/** One operation of a load, delivering the next `blocks` blocks of the prefix. */
export interface LoadPart {
  readonly blocks: number;
  /** The operation's logical outcome, as the ledger settled it (a late success stays a failure). */
  readonly outcome: OperationOutcome;
  /** Its quiescence, once the native layer proved it terminal; memory is never read before. */
  readonly quiescence: Quiescence | undefined;
}

export interface LoadInput {
  /** `drain.failedLoadPolicy`. */
  readonly policy: FailedLoadPolicy;
  /** The load's operations, in prefix order. */
  readonly parts: readonly LoadPart[];
  /** Checks block `index` of the prefix (digest, pattern, …); called in prefix order, only on delivered blocks. */
  readonly verify: (index: number) => boolean;
}

/**
 * What to do with a load: commit the first `commit` blocks, recompute the rest. `complete` only when
 * every part succeeded, is quiescent and every block verified.
 */
export type LoadDecision =
  | { readonly kind: 'complete'; readonly commit: number; readonly recompute: 0 }
  | { readonly kind: 'partial'; readonly commit: number; readonly recompute: number; readonly reason: string }
  | { readonly kind: 'failed'; readonly commit: 0; readonly recompute: number; readonly error: LoadFailedError };

/**
 * Applies the failed-load policy (`drain.failedLoadPolicy`). Unverified bytes are never reported as
 * success: a block counts only if its part succeeded (a late success after a timeout does not), is
 * quiescent, and the block verifies; the load commits only the longest prefix of such blocks.
 * `recompute` commits that prefix and recomputes the rest; `fail` fails the load (`LoadFailedError`).
 */
export function decideLoad(input: LoadInput): LoadDecision {
  const { policy, parts, verify } = checkOptionsObject('input', input);
  if (!Array.isArray(parts)) throw new InvalidDrainOptionError('parts', parts, 'must be an array of load parts');
  checkFunction('verify', verify);
  if (policy !== 'fail' && policy !== 'recompute') {
    throw new InvalidDrainOptionError('drain.failedLoadPolicy', policy, "must be 'fail' or 'recompute'");
  }
  let total = 0;
  parts.forEach((part, index) => {
    checkOptionsObject(`parts[${index}]`, part);
    if (!Number.isSafeInteger(part.blocks) || part.blocks < 1) {
      throw new InvalidDrainOptionError(`parts[${index}].blocks`, part.blocks, 'must be a positive integer');
    }
    const outcome: unknown = part.outcome;
    const ok = (outcome as { ok?: unknown } | null | undefined)?.ok;
    if (ok !== true && !(ok === false && (outcome as { error?: unknown }).error instanceof Error)) {
      throw new InvalidDrainOptionError(
        `parts[${index}].outcome`,
        outcome,
        "must be the operation's outcome: { ok: true, … } or { ok: false, error }",
      );
    }
    if (part.quiescence !== undefined) checkOptionsObject(`parts[${index}].quiescence`, part.quiescence);
    total += part.blocks;
  });
  let valid = 0;
  let reason: string | undefined;
  for (const [index, part] of parts.entries()) {
    if (part.quiescence === undefined) {
      reason = `part ${index} is not quiescent, so its memory cannot be read`;
      break;
    }
    if (!part.outcome.ok) {
      reason = `part ${index} failed: ${part.outcome.error.message}`;
      break;
    }
    const end = valid + part.blocks;
    while (valid < end && verify(valid)) valid += 1;
    if (valid < end) {
      reason = `block ${valid} did not verify`;
      break;
    }
  }
  if (reason === undefined) return { kind: 'complete', commit: total, recompute: 0 };
  if (policy === 'fail')
    return { kind: 'failed', commit: 0, recompute: total, error: new LoadFailedError(total, valid, reason) };
  return { kind: 'partial', commit: valid, recompute: total - valid, reason };
}
