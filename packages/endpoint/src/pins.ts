// What a reader holds once a source granted its pin: the contract between the pin protocol (which
// obtains, renews and releases pins) and the pull (which reads the pinned blocks and verifies them).
import type { RankId } from '@kvreuse/descriptors';
import { messageOf } from '@kvreuse/errors';

/** Why a source took back, or stopped answering for, a pin its reader still held. */
export type PinLossReason =
  | 'evicted'
  | 'shutting-down'
  | 'superseded'
  | 'lease-lapsed'
  | 'source-unresponsive'
  | 'source-disconnected'
  /** The source's memory belongs to an engine that went away (an adoption sidecar withdrew its banks). */
  | 'engine-gone';

export interface PinLoss {
  readonly reason: PinLossReason;
  /** The loss in words, naming the source rank and the pin. */
  readonly detail: string;
}

/**
 * One pin granted by one source rank. The source holds the blocks (no eviction, overwrite,
 * deregistration or hand-back) until the reader releases the pin or its lease lapses; the reader's
 * client renews the lease on its own while the pin is held.
 */
export interface HeldPin {
  readonly pinId: string;
  readonly source: {
    readonly workerId: string;
    readonly incarnation: string;
    readonly epoch: number;
    readonly rank: RankId;
  };
  /** The granted blocks: the first `count` of the requested positions, `[start, start + count)` of the prompt's chain. */
  readonly positions: { readonly start: number; readonly count: number };
  /** Per granted block, in position order: its block index in the source rank's banks (what a template post names). */
  readonly sourceBlocks: Uint32Array;
  /**
   * Per granted block, the source's checksum of the bytes this reader's rank will read from it: CRC-32 of
   * the block's rows over the template routes of the (source rank, reader rank) pair, in route order.
   * Absent when the reader asked for no verification.
   */
  readonly checksums?: Uint32Array;
  /** Settles, once, when the source revokes the pin or stops answering for it; never rejects. */
  readonly lost: Promise<PinLoss>;
  /** Gives the pin back. Call only once every operation reading its blocks is quiescent. */
  release(): Promise<void>;
}

/** What a pull calls, with the pins it holds, before it releases them (`PullRequest.beforeRelease`). */
export type BeforeRelease = (pins: readonly HeldPin[]) => Promise<unknown>;

/**
 * Releases `pins` (each whatever the others do) once `beforeRelease`, if given and any pin is held,
 * settled; its rejection is reported as a process warning and the pins are released all the same.
 */
export async function releasePins(pins: readonly HeldPin[], beforeRelease: BeforeRelease | undefined): Promise<void> {
  if (pins.length > 0 && beforeRelease !== undefined) {
    await beforeRelease(pins).catch((error: unknown) =>
      process.emitWarning(`endpoint: beforeRelease threw; releasing the pins: ${messageOf(error)}`),
    );
  }
  await Promise.allSettled(pins.map((pin) => pin.release()));
}
