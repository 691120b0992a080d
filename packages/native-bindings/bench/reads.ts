// Timing READs through the facade, shared by the benchmark and the readers it runs in other processes.
import type { Agent, PostRequest, TransferDescriptors } from '@kvreuse/native-bindings';

export function seconds(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/** The same `count` descriptors of `bytes` each, at the offsets `offsetOf(i)` on both sides. */
export function descriptors(
  count: number,
  bytes: number,
  offsetOf: (i: number) => number,
  destinationOffsetOf: (i: number) => number = offsetOf,
): TransferDescriptors {
  // Every element written, banks included, as materialize's writer does: a zero-filled array that was
  // never written is untouched memory, and the post reading it would pay its page faults.
  return {
    sourceBank: Uint32Array.from({ length: count }, () => 0),
    sourceOffset: BigUint64Array.from({ length: count }, (_, i) => BigInt(offsetOf(i))),
    destinationBank: Uint32Array.from({ length: count }, () => 0),
    destinationOffset: BigUint64Array.from({ length: count }, (_, i) => BigInt(destinationOffsetOf(i))),
    length: new BigUint64Array(count).fill(BigInt(bytes)),
  };
}

/**
 * Seconds from posting `batches` copies of `request` (at most `window` in flight) to the last completion.
 * Given several requests, each is posted for an equal run of the batches, in turn, with no pause between.
 */
export async function timeReads(
  agent: Agent,
  request: PostRequest | readonly PostRequest[],
  batches: number,
  window: number,
): Promise<number> {
  const requests = Array.isArray(request) ? request : [request];
  const start = process.hrtime.bigint();
  const inFlight = new Set<Promise<void>>();
  for (let b = 0; b < batches; b++) {
    if (inFlight.size >= window) await Promise.race(inFlight);
    const operation = agent.post(requests[Math.floor((b * requests.length) / batches)] as PostRequest);
    const settled: Promise<void> = operation.done.then(() => {
      operation.release();
      inFlight.delete(settled);
    });
    inFlight.add(settled);
  }
  await Promise.all(inFlight);
  return seconds(start);
}
