import { isKvreuseError, keepCleanupFailures, messageOf } from '@kvreuse/errors';
import { Subscriber } from 'zeromq';
import { EngineBatchDecoder } from './decode-batch.js';
import type { EngineEventBatch } from './engine-event.js';
import { EngineInventoryFeed, type FeedOutcome, type SkipReason } from './engine-inventory-feed.js';
import { EndpointShapeError, EngineEventsInputError, RankPortError } from './errors.js';
import { ReplayClient } from './replay-client.js';

/** What a subscriber counted since it opened. */
export interface EngineSubscriberMetrics {
  readonly batches: number;
  /** Batches the inventory ignored (it holds a newer epoch of the worker's): counted here, not in `batches`. */
  readonly ignoredBatches: number;
  readonly events: {
    readonly stored: number;
    readonly removed: number;
    readonly cleared: number;
    readonly unknown: number;
  };
  readonly blocksStored: number;
  readonly blocksRemoved: number;
  readonly skippedBlocks: Readonly<Partial<Record<SkipReason, number>>>;
  /** Frames that were not a batch, by what was wrong: `frames` (not 3 frames), `sequence` (not 8 bytes), `payload`. */
  readonly malformed: { readonly frames: number; readonly sequence: number; readonly payload: number };
  /** Sequence numbers skipped by the live stream, and how many batches they missed. */
  readonly gaps: number;
  readonly missedBatches: number;
  readonly replays: number;
  readonly replayedBatches: number;
  /** Missed batches no replay brought back (no replay socket, a publisher that no longer held them, or no answer). */
  readonly unrepairedBatches: number;
  readonly replayFailures: number;
  /** Sequence numbers that went back: the publisher restarted, and the worker's inventory started afresh. */
  readonly restarts: number;
  /**
   * Publisher restarts the inventory ignored (it holds a newer epoch of the worker's): the worker's
   * inventory was not started afresh. Counted here, not in `restarts`.
   */
  readonly ignoredRestarts: number;
  readonly lastSeq: bigint | null;
  /** How long after the engine published it the last batch was applied (ms; null before the first). */
  readonly lagMs: number | null;
}

/** What happened, in order, for a caller that follows a subscriber (a CLI, a test). */
export type EngineSubscriberEvent =
  | { readonly kind: 'batch'; readonly seq: bigint; readonly replayed: boolean; readonly outcome: FeedOutcome }
  | { readonly kind: 'gap'; readonly from: bigint; readonly to: bigint }
  | {
      readonly kind: 'replayed';
      readonly from: bigint;
      readonly to: bigint;
      readonly batches: number;
      readonly unrepaired: number;
    }
  /**
   * `ignored`: the inventory ignored the restart (it holds a newer epoch of the worker's), and the
   * worker's inventory was not started afresh.
   */
  | { readonly kind: 'restart'; readonly seq: bigint; readonly ignored: boolean }
  | { readonly kind: 'malformed'; readonly seq: bigint | null; readonly reason: string }
  /** The subscriber stopped on an error it cannot go on from (its sockets are closed). */
  | { readonly kind: 'failed'; readonly reason: string };

export interface EngineSubscriberOptions {
  /** The publisher's PUB endpoint of this rank, e.g. `tcp://10.0.0.5:5557`. */
  readonly endpoint: string;
  /** Its replay (ROUTER) endpoint; without one, gaps are counted but not repaired. */
  readonly replayEndpoint?: string;
  /** The topic prefix to subscribe to (default: every topic). */
  readonly topic?: string;
  /** The inventory worker the events are this engine worker's (by convention `<engine>/dp<rank>`). */
  readonly workerId: string;
  readonly feed: EngineInventoryFeed;
  /** How long to wait for each replay reply (ms, default 5,000). */
  readonly replayTimeoutMs?: number;
  /** Wall clock in ms since the Unix epoch (default `Date.now`), for the lag. */
  readonly now?: () => number;
  readonly onEvent?: (event: EngineSubscriberEvent) => void;
}

type Counters = { -readonly [K in keyof EngineSubscriberMetrics]: EngineSubscriberMetrics[K] } & {
  events: { stored: number; removed: number; cleared: number; unknown: number };
  malformed: { frames: number; sequence: number; payload: number };
  skippedBlocks: Partial<Record<SkipReason, number>>;
};

/**
 * Follows one engine publisher (one data-parallel rank): a ZMQ SUB of `[topic, seq, payload]` frames,
 * each batch decoded and applied to the feed under `workerId`. The sequence numbers start at 0 per
 * publisher process: a gap (from 0, for batches published before it joined) is repaired from the
 * replay socket when there is one, a decrease means the publisher restarted, and the worker's
 * inventory starts afresh (`EngineInventoryFeed.restart`). Malformed frames are counted and skipped.
 */
export class EngineEventSubscriber {
  readonly #socket: Subscriber;
  readonly #replay: ReplayClient | undefined;
  readonly #decoder = new EngineBatchDecoder();
  readonly #options: EngineSubscriberOptions;
  readonly #now: () => number;
  readonly #counters: Counters;
  #expected = 0n;
  #closed = false;
  /** Resolves when the receive loop has ended (after `close()`). */
  readonly done: Promise<void>;

  constructor(options: EngineSubscriberOptions) {
    checkOptions(options);
    // A copy: what the caller changes in its options object afterwards does not reach the subscriber.
    this.#options = { ...options };
    this.#now = options.now ?? Date.now;
    this.#counters = freshCounters();
    this.#socket = new Subscriber({ linger: 0 });
    try {
      connecting('options.endpoint', options.endpoint, () => this.#socket.connect(options.endpoint));
      const { replayEndpoint } = options;
      this.#replay =
        replayEndpoint === undefined
          ? undefined
          : connecting(
              'options.replayEndpoint',
              replayEndpoint,
              () => new ReplayClient(replayEndpoint, options.replayTimeoutMs ?? 5_000),
            );
    } catch (error) {
      this.#socket.close();
      throw error;
    }
    this.#socket.subscribe(options.topic ?? '');
    this.done = this.#run();
  }

  get workerId(): string {
    return this.#options.workerId;
  }

  metrics(): EngineSubscriberMetrics {
    return structuredClone(this.#counters);
  }

  /** Closes its sockets; every call, the first or a later one, resolves once the receive loop has ended. */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#socket.close();
      this.#replay?.close();
    }
    await this.done;
  }

  async #run(): Promise<void> {
    try {
      for await (const frames of this.#socket) await this.#message(frames);
    } catch (error) {
      // Closing the socket ends the iteration with an error of its own. Anything else stops the
      // subscriber and is reported, never thrown from a promise nobody awaits.
      if (this.#closed) return;
      this.#closed = true;
      this.#socket.close();
      this.#replay?.close();
      this.#emit({ kind: 'failed', reason: messageOf(error) });
    }
  }

  async #message(frames: Buffer[]): Promise<void> {
    if (frames.length !== 3) return this.#malformed('frames', null, `a message is 3 frames, not ${frames.length}`);
    const [, seqFrame, payload] = frames as [Buffer, Buffer, Buffer];
    if (seqFrame.length !== 8)
      return this.#malformed('sequence', null, `a sequence number is 8 bytes, not ${seqFrame.length}`);
    const seq = seqFrame.readBigUInt64BE();
    if (seq < this.#expected) {
      const ignored = !this.#options.feed.restart(this.#options.workerId);
      if (ignored) this.#counters.ignoredRestarts += 1;
      else this.#counters.restarts += 1;
      this.#expected = 0n;
      this.#emit({ kind: 'restart', seq, ignored });
      // Closed by the restart's own onEvent: no gap is reported, nothing more reaches the feed.
      if (this.#closed) return;
    }
    if (seq > this.#expected) await this.#repair(seq);
    // Closed while the replay ran: nothing more reaches the feed.
    if (this.#closed) return;
    this.#apply(seq, payload, false);
  }

  /** The live stream skipped from `#expected` to `seq`: replays what the publisher still holds. */
  async #repair(seq: bigint): Promise<void> {
    const from = this.#expected;
    const counters = this.#counters;
    counters.gaps += 1;
    counters.missedBatches += Number(seq - from);
    this.#emit({ kind: 'gap', from, to: seq });
    // Closed by the gap's own onEvent: no replay is asked for.
    if (this.#closed) return;
    let batches = 0;
    if (this.#replay !== undefined) {
      counters.replays += 1;
      const replies = this.#replay.replay(from);
      let result = await replies.next();
      for (; result.done !== true; result = await replies.next()) {
        if (this.#closed) return;
        const reply = result.value;
        if (reply.kind === 'malformed') this.#malformed('payload', null, `replay: ${reply.reason}`);
        else if (reply.seq >= this.#expected && reply.seq < seq) {
          this.#apply(reply.seq, reply.payload, true);
          batches += 1;
        }
      }
      // A replay the close let go of did not fail.
      if (this.#closed) return;
      if (result.value === false) counters.replayFailures += 1;
    }
    const unrepaired = Number(seq - from) - batches;
    counters.replayedBatches += batches;
    counters.unrepairedBatches += unrepaired;
    if (this.#replay !== undefined) this.#emit({ kind: 'replayed', from, to: seq, batches, unrepaired });
    this.#expected = seq;
  }

  #apply(seq: bigint, payload: Uint8Array, replayed: boolean): void {
    this.#expected = seq + 1n;
    this.#counters.lastSeq = seq;
    const result = this.#decoder.decode(payload);
    if (!result.ok) return this.#malformed('payload', seq, result.error.message);
    let outcome: FeedOutcome;
    try {
      outcome = this.#options.feed.apply(this.#options.workerId, result.batch);
    } catch (error) {
      // A batch the inventory refuses (a typed error) is skipped like a malformed one; anything else is a defect.
      if (!isKvreuseError(error)) throw error;
      return this.#malformed('payload', seq, error.message);
    }
    this.#count(result.batch, outcome);
    this.#emit({ kind: 'batch', seq, replayed, outcome });
  }

  #count(batch: EngineEventBatch, outcome: FeedOutcome): void {
    const counters = this.#counters;
    for (const event of batch.events) {
      if (event.type === 'BlockStored') counters.events.stored += 1;
      else if (event.type === 'BlockRemoved') counters.events.removed += 1;
      else counters.events.cleared += 1;
    }
    counters.events.unknown += batch.unknownEventTypes.length;
    if (outcome.ignored) {
      counters.ignoredBatches += 1;
      return;
    }
    counters.batches += 1;
    counters.blocksStored += outcome.stored;
    counters.blocksRemoved += outcome.removed;
    for (const [reason, blocks] of Object.entries(outcome.skipped) as [SkipReason, number][])
      counters.skippedBlocks[reason] = (counters.skippedBlocks[reason] ?? 0) + blocks;
    counters.lagMs = Math.max(0, this.#now() - batch.ts * 1000);
  }

  #malformed(kind: keyof Counters['malformed'], seq: bigint | null, reason: string): void {
    this.#counters.malformed[kind] += 1;
    this.#emit({ kind: 'malformed', seq, reason });
  }

  /** A throwing `onEvent` is reported as a process warning: it neither stops the subscriber nor undoes what it did. */
  #emit(event: EngineSubscriberEvent): void {
    try {
      this.#options.onEvent?.(event);
    } catch (error) {
      process.emitWarning(
        `engine events: onEvent of ${this.#options.workerId} threw on a "${event.kind}" event: ${messageOf(error)}`,
      );
    }
  }
}

/** What `connect` returns; a ZMQ error it throws is refused as `argument`, an endpoint ZMQ cannot connect to. */
function connecting<T>(argument: string, endpoint: string, connect: () => T): T {
  try {
    return connect();
  } catch (error) {
    throw new EngineEventsInputError(argument, endpoint, `ZMQ cannot connect to it: ${zmqReason(error)}`, {
      cause: error,
    });
  }
}

/** A ZMQ error as its message and errno name: `File name too long (ENAMETOOLONG)`. */
function zmqReason(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const { code } = error as { code?: unknown };
  return typeof code === 'string' ? `${error.message} (${code})` : error.message;
}

function freshCounters(): Counters {
  return {
    batches: 0,
    ignoredBatches: 0,
    events: { stored: 0, removed: 0, cleared: 0, unknown: 0 },
    blocksStored: 0,
    blocksRemoved: 0,
    skippedBlocks: {},
    malformed: { frames: 0, sequence: 0, payload: 0 },
    gaps: 0,
    missedBatches: 0,
    replays: 0,
    replayedBatches: 0,
    unrepairedBatches: 0,
    replayFailures: 0,
    restarts: 0,
    ignoredRestarts: 0,
    lastSeq: null,
    lagMs: null,
  };
}

/** ZMQ's receive timeout is a C int: a longer one is refused (2^31) or wraps around (2^40 reads as 0). */
const maxReplayTimeoutMs = 2 ** 31 - 1;

function checkOptions(options: EngineSubscriberOptions): void {
  if (options === null || typeof options !== 'object')
    throw new EngineEventsInputError('options', options, 'options are { endpoint, workerId, feed, … }');
  for (const name of ['endpoint', 'workerId'] as const) {
    if (typeof options[name] !== 'string' || options[name].length === 0)
      throw new EngineEventsInputError(`options.${name}`, options[name], 'a non-empty string');
  }
  if (
    options.replayEndpoint !== undefined &&
    (typeof options.replayEndpoint !== 'string' || options.replayEndpoint === '')
  )
    throw new EngineEventsInputError('options.replayEndpoint', options.replayEndpoint, 'a non-empty string when given');
  if (options.topic !== undefined && typeof options.topic !== 'string')
    throw new EngineEventsInputError('options.topic', options.topic, 'a topic prefix is a string when given');
  if (!(options.feed instanceof EngineInventoryFeed))
    throw new EngineEventsInputError('options.feed', options.feed, 'an EngineInventoryFeed');
  for (const name of ['now', 'onEvent'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function')
      throw new EngineEventsInputError(`options.${name}`, options[name], 'a function when given');
  }
  const timeout = options.replayTimeoutMs;
  if (timeout !== undefined && (!Number.isSafeInteger(timeout) || timeout < 1 || timeout > maxReplayTimeoutMs))
    throw new EngineEventsInputError(
      'options.replayTimeoutMs',
      timeout,
      `a whole number of ms from 1 to ${maxReplayTimeoutMs} (ZMQ's longest receive timeout)`,
    );
}

/**
 * The endpoint of data-parallel rank `rank` when rank 0's is `endpoint`, as vLLM and SGLang derive it:
 * a tcp port plus the rank; an ipc or inproc name with `_dp<rank>` appended. Refuses an endpoint of
 * another shape (`EndpointShapeError`), and a port that leaves the rank no port (`RankPortError`).
 */
export function rankEndpoint(endpoint: string, rank: number): string {
  return endpointOfRank('endpoint', endpoint, rank);
}

/** `rankEndpoint`, refusing `endpoint` under the name `argument`. */
function endpointOfRank(argument: string, endpoint: string, rank: number): string {
  if (!Number.isSafeInteger(rank) || rank < 0)
    throw new EngineEventsInputError('rank', rank, 'a data-parallel rank is a whole number ≥ 0');
  if (typeof endpoint === 'string' && /^(?:ipc|inproc):\/\/./.test(endpoint))
    return rank === 0 ? endpoint : `${endpoint}_dp${rank}`;
  const match = typeof endpoint === 'string' ? /^(tcp:\/\/.+):(\d+)$/.exec(endpoint) : null;
  if (match === null) throw new EndpointShapeError(argument, endpoint);
  const port = Number(match[2]) + rank;
  if (port < 1 || port > 65_535) throw new RankPortError(endpoint, rank, argument);
  return rank === 0 ? endpoint : `${match[1]}:${port}`;
}

/** Which rank of an engine an event `subscribeEngineRanks` reports came from. */
export interface EngineRankSource {
  readonly rank: number;
  /** `<engine>/dp<rank>`: the inventory worker the rank's events feed. */
  readonly workerId: string;
  /** The rank's subscriber, for its `metrics()`. */
  readonly subscriber: EngineEventSubscriber;
}

export type EngineRanksOptions = Omit<
  EngineSubscriberOptions,
  'workerId' | 'endpoint' | 'replayEndpoint' | 'onEvent'
> & {
  /** The engine's name: rank r's events are worker `<engine>/dp<r>`'s. */
  readonly engine: string;
  /** Rank 0's PUB endpoint (rank r's is derived as `rankEndpoint` says). */
  readonly endpoint: string;
  /** Rank 0's replay endpoint, when the engine has them. */
  readonly replayEndpoint?: string;
  /** How many data-parallel ranks the engine runs (one publisher each; default 1, at most 1024). */
  readonly ranks?: number;
  /** Every rank's events as they happen (as `EngineSubscriberOptions.onEvent`), each with the rank it came from. */
  readonly onEvent?: (event: EngineSubscriberEvent, source: EngineRankSource) => void;
};

/**
 * The most data-parallel ranks an engine is followed with (`subscribeEngineRanks`): each
 * is a publisher with a subscriber and sockets of its own, and a count past any engine's parallel degree
 * is a mistake, not a deployment.
 */
export const maxEngineRanks = 1024;

function checkRankCount(argument: string, ranks: unknown): void {
  if (!Number.isSafeInteger(ranks) || (ranks as number) < 1 || (ranks as number) > maxEngineRanks)
    throw new EngineEventsInputError(
      argument,
      ranks,
      `a number of ranks is a whole number from 1 to ${maxEngineRanks}`,
    );
}

function endpointsOfRanks(argument: string, endpoint: string, ranks: number): string[] {
  return Array.from({ length: ranks }, (_, rank) => endpointOfRank(argument, endpoint, rank));
}

/**
 * One subscriber per data-parallel rank of an engine. An endpoint refused, for any rank, names the
 * option it derives from (`options.endpoint`, `options.replayEndpoint`) and, when ZMQ cannot connect to
 * a rank's, the rank; every rank opened before is closed, its receive loop ended, before the promise
 * rejects. A close that fails is kept with the error (`keepCleanupFailures`): on its `cause` (an
 * `AggregateError` after the cause it had), or, where the error cannot keep it (not an Error, frozen), in a
 * `CleanupFailedError` carrying both.
 */
export async function subscribeEngineRanks(options: EngineRanksOptions): Promise<EngineEventSubscriber[]> {
  if (options === null || typeof options !== 'object')
    throw new EngineEventsInputError('options', options, 'options are { engine, endpoint, feed, … }');
  const { engine, endpoint, replayEndpoint, ranks = 1, onEvent, ...common } = options;
  if (typeof engine !== 'string' || engine.length === 0)
    throw new EngineEventsInputError('options.engine', engine, "an engine's name is a non-empty string");
  checkRankCount('options.ranks', ranks);
  if (onEvent !== undefined && typeof onEvent !== 'function')
    throw new EngineEventsInputError('options.onEvent', onEvent, 'a function when given');
  // Every rank's endpoints first: a refused one opens nothing.
  const publishers = endpointsOfRanks('options.endpoint', endpoint, ranks);
  const replays =
    replayEndpoint === undefined ? undefined : endpointsOfRanks('options.replayEndpoint', replayEndpoint, ranks);
  const subscribers: EngineEventSubscriber[] = [];
  for (const [rank, publisher] of publishers.entries()) {
    const workerId = `${engine}/dp${rank}`;
    try {
      const subscriber = new EngineEventSubscriber({
        ...common,
        workerId,
        endpoint: publisher,
        ...(replays === undefined ? {} : { replayEndpoint: replays[rank]! }),
        // A subscriber reports nothing before its constructor has returned: `source` is there by then.
        ...(onEvent === undefined ? {} : { onEvent: (event: EngineSubscriberEvent) => onEvent(event, source) }),
      });
      const source: EngineRankSource = { rank, workerId, subscriber };
      subscribers.push(subscriber);
    } catch (error) {
      throw keepCleanupFailures(
        rankRefusal(rank, options, error),
        'closing the ranks it had opened',
        await closeEach(subscribers),
      );
    }
  }
  return subscribers;
}

/**
 * Closes every subscriber, each close awaited whatever the others do; returns what the closes that
 * failed threw. Bounded without a timer: closing the sockets ends every receive a loop waits in, and
 * nothing else it awaits (the feed and `onEvent` are synchronous).
 */
async function closeEach(subscribers: readonly EngineEventSubscriber[]): Promise<unknown[]> {
  const outcomes = await Promise.allSettled(subscribers.map((subscriber) => subscriber.close()));
  return outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as unknown] : []));
}

/** Rank `rank`'s endpoint refused as ZMQ's refusal of the option it derives from, naming the rank. */
function rankRefusal(rank: number, options: EngineRanksOptions, error: unknown): unknown {
  if (!(error instanceof EngineEventsInputError)) return error;
  const { argument } = error;
  if (argument !== 'options.endpoint' && argument !== 'options.replayEndpoint') return error;
  const option = argument === 'options.endpoint' ? options.endpoint : options.replayEndpoint;
  return new EngineEventsInputError(argument, option, `rank ${rank} follows ${String(error.value)}: ${error.reason}`, {
    cause: error,
  });
}
