// A test-only HeldPin: what the pin client would hand the pull once a source granted a pin. It
// isolates the pull from the pin protocol (which has its own tests); the blocks it names are read
// for real from the source agents' registered memory.
import type { RankId } from '@kvreuse/descriptors';
import type { HeldPin, PinLoss } from '../src/pins.js';

export interface FakePin extends HeldPin {
  /** Settles `lost` as the source revoking the pin would. */
  lose(loss: PinLoss): void;
  readonly releases: number;
}

export function fakePin(options: {
  pinId: string;
  rank: RankId;
  sourceBlocks: Uint32Array;
  checksums?: Uint32Array;
  onRelease?: () => void;
}): FakePin {
  let lose!: (loss: PinLoss) => void;
  const lost = new Promise<PinLoss>((resolve) => (lose = resolve));
  let releases = 0;
  return {
    pinId: options.pinId,
    source: { workerId: 'source', incarnation: 'source-inc', epoch: 1, rank: options.rank },
    positions: { start: 0, count: options.sourceBlocks.length },
    sourceBlocks: options.sourceBlocks,
    ...(options.checksums === undefined ? {} : { checksums: options.checksums }),
    lost,
    lose,
    get releases() {
      return releases;
    },
    release() {
      releases += 1;
      options.onRelease?.();
      return Promise.resolve();
    },
  };
}
