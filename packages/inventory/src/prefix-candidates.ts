// The bookkeeping of a lookup that follows many workers together (`RetainedTable.walk` when many
// workers retain a chain's first block): each candidate worker's prefix so far, and which worker is
// which candidate, marked per lookup so that nothing is cleared between lookups.

/** Stamps stay int32. */
const maxStamp = 0x7fffffff;

/**
 * Receives one worker slot's retained prefix from `RetainedTable.walk`: how many leading blocks, how many
 * of them on each tier, how many leading ones on the host, and the earliest expiry tick among them.
 */
export type PrefixFound = (
  worker: number,
  blocks: number,
  gpuBlocks: number,
  hostBlocks: number,
  leadingHostBlocks: number,
  expiryTick: number,
) => void;

function grown(array: Int32Array, length: number): Int32Array<ArrayBuffer> {
  const next = new Int32Array(length);
  next.set(array.subarray(0, Math.min(array.length, length)));
  return next;
}

/** Candidate workers of one lookup, in typed arrays indexed by worker (mark, markPos) or by candidate (the rest). */
export class PrefixCandidates {
  private mark = new Int32Array(16);
  private markPos = new Int32Array(16);
  private stamp = 0;
  private count = 0;
  private worker = new Int32Array(16);
  private depth = new Int32Array(16);
  private gpu = new Int32Array(16);
  private host = new Int32Array(16);
  private leadingHost = new Int32Array(16);
  private expiry = new Int32Array(16);

  /** Makes room for worker slots up to `worker`. */
  addWorker(worker: number): void {
    if (worker < this.mark.length) return;
    const size = Math.max(worker + 1, this.mark.length * 2);
    this.mark = grown(this.mark, size);
    this.markPos = grown(this.markPos, size);
    this.worker = grown(this.worker, size);
    this.depth = grown(this.depth, size);
    this.gpu = grown(this.gpu, size);
    this.host = grown(this.host, size);
    this.leadingHost = grown(this.leadingHost, size);
    this.expiry = grown(this.expiry, size);
  }

  /** Starts a lookup with no candidates. */
  begin(): void {
    this.count = 0;
    this.stamp = (this.stamp + 1) % maxStamp;
    if (this.stamp === 0) {
      this.mark.fill(0);
      this.stamp = 1;
    }
  }

  /**
   * One (worker, block) entry met at `depth`, with its expiry ticks: at depth 0 it makes the worker a
   * candidate, later it extends the worker's prefix if the prefix reached `depth`. Returns 1 if the
   * worker's prefix grew.
   */
  visit(worker: number, depth: number, gpuExpiry: number, hostExpiry: number, nowTick: number): number {
    const gpu = gpuExpiry > nowTick;
    const host = hostExpiry > nowTick;
    if (!gpu && !host) return 0;
    let c: number;
    if (depth === 0) {
      c = this.count++;
      this.mark[worker] = this.stamp;
      this.markPos[worker] = c;
      this.worker[c] = worker;
      this.gpu[c] = 0;
      this.host[c] = 0;
      this.leadingHost[c] = 0;
      this.expiry[c] = gpu ? gpuExpiry : hostExpiry;
    } else {
      if (this.mark[worker] !== this.stamp) return 0;
      c = this.markPos[worker]!;
      if (this.depth[c] !== depth) return 0;
    }
    this.depth[c] = depth + 1;
    if (gpu) {
      this.gpu[c]!++;
      if (gpuExpiry < this.expiry[c]!) this.expiry[c] = gpuExpiry;
    }
    if (host) {
      this.host[c]!++;
      if (this.leadingHost[c] === depth) this.leadingHost[c]!++;
      if (hostExpiry < this.expiry[c]!) this.expiry[c] = hostExpiry;
    }
    return 1;
  }

  /** Reports every candidate's prefix. */
  report(report: PrefixFound): void {
    for (let c = 0; c < this.count; c++) {
      report(this.worker[c]!, this.depth[c]!, this.gpu[c]!, this.host[c]!, this.leadingHost[c]!, this.expiry[c]!);
    }
  }
}
