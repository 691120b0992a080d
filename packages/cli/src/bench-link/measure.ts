// The measurement of `kvreuse bench link`: at each size, messages posted through the facade one
// descriptor each, `inFlight` at a time, each timed from its post to its completion.
import type { Agent, Operation, PostRequest, TransferDirection } from '@kvreuse/native-bindings';
import { PeerTimeoutError } from '../errors.js';

/** One size in one direction, as measured. */
export interface LinkMeasurement {
  readonly direction: TransferDirection;
  readonly bytes: number;
  readonly iterations: number;
  /** Post to completion of each message: the median and the mean, in microseconds. */
  readonly latencyMedianUs: number;
  readonly latencyAverageUs: number;
  /** Bytes of the measured messages over the time from the first post to the last completion. */
  readonly bytesPerSecond: number;
  readonly messagesPerSecond: number;
}

/** How each size is measured. */
export interface MeasureOptions {
  readonly iterations: number;
  readonly warmup: number;
  readonly inFlight: number;
  /** A message not complete this long after the last completion fails the run. */
  readonly timeoutMs: number;
  /** The peer, as errors name it. */
  readonly peer: string;
}

/**
 * Posts `count` copies of `request`, at most `inFlight` in flight, writing each one's post-to-completion
 * nanoseconds into `latencies`; resolves with the nanoseconds from the first post to the last completion.
 * A message not complete `timeoutMs` after the last progress cancels those in flight and fails with `PeerTimeoutError`.
 */
function postAll(
  agent: Agent,
  request: PostRequest,
  count: number,
  inFlight: number,
  latencies: Float64Array,
  options: MeasureOptions,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const pending = new Set<Operation>();
    let posted = 0;
    let completed = 0;
    let lastProgress = Date.now();
    let failed = false;
    const fail = (error: unknown): void => {
      if (failed) return;
      failed = true;
      clearInterval(watchdog);
      for (const operation of pending) operation.cancel();
      reject(error);
    };
    const watchdog = setInterval(
      () => {
        if (Date.now() - lastProgress > options.timeoutMs)
          fail(new PeerTimeoutError(options.peer, `the completion of a ${request.direction}`, options.timeoutMs));
      },
      Math.min(options.timeoutMs, 250),
    );
    const start = process.hrtime.bigint();
    const postOne = (): void => {
      const index = posted++;
      const postedAt = process.hrtime.bigint();
      let operation: Operation;
      try {
        operation = agent.post(request);
      } catch (error) {
        fail(error);
        return;
      }
      pending.add(operation);
      operation.done.then(
        () => {
          latencies[index] = Number(process.hrtime.bigint() - postedAt);
          pending.delete(operation);
          operation.release();
          if (failed) return;
          completed++;
          lastProgress = Date.now();
          if (posted < count) postOne();
          else if (completed === count) {
            clearInterval(watchdog);
            resolve(Number(process.hrtime.bigint() - start));
          }
        },
        (error: unknown) => {
          pending.delete(operation);
          operation.release();
          fail(error);
        },
      );
    };
    for (let i = 0; i < Math.min(inFlight, count); i++) postOne();
  });
}

function median(values: Float64Array): number {
  const sorted = Float64Array.from(values).sort();
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** One message of `bytes` from offset 0 to offset 0 of the two regions, in `direction`. */
export function oneMessage(
  base: Omit<PostRequest, 'descriptors' | 'direction'>,
  direction: TransferDirection,
  bytes: number,
): PostRequest {
  return {
    ...base,
    direction,
    descriptors: {
      sourceBank: Uint32Array.of(0),
      sourceOffset: BigUint64Array.of(0n),
      destinationBank: Uint32Array.of(0),
      destinationOffset: BigUint64Array.of(0n),
      length: BigUint64Array.of(BigInt(bytes)),
    },
  };
}

/** Warms up, then measures `request` (one message) `options.iterations` times. */
export async function measure(agent: Agent, request: PostRequest, options: MeasureOptions): Promise<LinkMeasurement> {
  const bytes = Number(request.descriptors.length[0]);
  if (options.warmup > 0)
    await postAll(agent, request, options.warmup, options.inFlight, new Float64Array(options.warmup), options);
  const latencies = new Float64Array(options.iterations);
  const totalNs = await postAll(agent, request, options.iterations, options.inFlight, latencies, options);
  const seconds = totalNs / 1e9;
  return {
    direction: request.direction,
    bytes,
    iterations: options.iterations,
    latencyMedianUs: median(latencies) / 1e3,
    latencyAverageUs: latencies.reduce((sum, ns) => sum + ns, 0) / latencies.length / 1e3,
    bytesPerSecond: (bytes * options.iterations) / seconds,
    messagesPerSecond: options.iterations / seconds,
  };
}
