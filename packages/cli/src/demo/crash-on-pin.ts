// The decode rank's pin adapter: the reference BlockPool, which the demo can arm so that the rank
// crashes at the next pin request, before it answers: a source lost in the middle of a pull, at a
// point the demo controls.
import type { AdapterGrant, BlockPool, EvictedBlock, PinAdapter } from '@kvreuse/endpoint';

export class CrashOnPin implements PinAdapter {
  readonly pool: BlockPool;
  readonly #crash: () => void;
  #armed = false;

  /** `crash` ends the rank without a drain (SIGKILL for a rank process). */
  constructor(pool: BlockPool, crash: () => void) {
    this.pool = pool;
    this.#crash = crash;
  }

  /** The next pin request crashes the rank instead of being answered. */
  arm(): void {
    this.#armed = true;
  }

  requestPin(pinId: string, hashes: readonly bigint[]): AdapterGrant | Promise<AdapterGrant> {
    if (!this.#armed) return this.pool.requestPin(pinId, hashes);
    this.#crash();
    // A crashed rank answers nothing.
    return new Promise<AdapterGrant>(() => undefined);
  }

  renewPin(pinId: string): boolean {
    return this.pool.renewPin(pinId);
  }

  releasePin(pinId: string): void {
    this.pool.releasePin(pinId);
  }

  cancelPin(pinId: string): void {
    this.pool.cancelPin(pinId);
  }

  onEvicted(listener: (evicted: readonly EvictedBlock[]) => void): () => void {
    return this.pool.onEvicted(listener);
  }
}
