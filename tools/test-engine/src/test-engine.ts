import { createHash } from 'node:crypto';
import { EngineMemory, SidecarConnection } from './engine-memory.js';
import { Router, XPublisher } from 'zeromq';
import { blockHash, noneHash } from './block-hash.js';
import { type EngineEvent, encodeBatch, type EventEncoding, type HashForm } from './encode-events.js';

const endSeq = Buffer.from('ffffffffffffffff', 'hex');
const seqBytes = (seq: number): Buffer => {
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64BE(BigInt(seq));
  return bytes;
};
const hexOf = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

export interface TestEngineOptions {
  /** Blocks of host memory the engine owns (default 64). */
  readonly blocks?: number;
  readonly blockSize?: number;
  /** Bytes per block of KV memory (default 256). */
  readonly blockBytes?: number;
  /** vLLM's PYTHONHASHSEED: the seed of the first block's parent (default '0'). */
  readonly seed?: string;
  readonly encoding?: EventEncoding;
  readonly hashForm?: HashForm;
  /** The replay replies' form: `[empty, seq, payload]` (vLLM's ROUTER) or `[seq, payload]` (older). */
  readonly replayFrames?: 'delimited' | 'bare';
  readonly topic?: string;
  readonly rank?: number;
  /** Where the publisher binds (default 127.0.0.1 on a port the system picks): `inproc://…` for a rank's own name. */
  readonly endpoint?: string;
  /** Seconds since the Unix epoch the batches are stamped with (default the wall clock). */
  readonly clock?: () => number;
}

interface Held {
  readonly slot: number;
  readonly hash: Uint8Array;
}

/**
 * An engine as kvreuse meets it: it owns host memory, fills a block of it for each full block of a
 * token sequence it is given (its prefix cache: a block already held is reused, the least recently
 * stored is evicted when memory is full), and publishes what it holds as vLLM's KV events over ZMQ — a
 * PUB of `[topic, seq, payload]` (an XPUB, so that a test can wait for its subscriber) and a ROUTER
 * that replays the batches it still holds.
 */
export class TestEngine {
  /** The engine's KV memory: a memfd sealed against shrinking, which `adopt` hands to a kvreuse sidecar. */
  readonly memory: Buffer;
  readonly #file: EngineMemory;
  #sidecar: SidecarConnection | undefined;
  /** Every token sequence stored (full blocks only) with its block hashes: what an adoption describes. */
  readonly #sequences: { readonly tokens: readonly number[]; readonly hashes: readonly Uint8Array[] }[] = [];
  readonly #publisher = new XPublisher({ linger: 0 });
  readonly #router = new Router({ linger: 0 });
  readonly #options: Required<TestEngineOptions>;
  readonly #held = new Map<string, Held>();
  readonly #free: number[];
  readonly #sent: { seq: number; payload: Uint8Array }[] = [];
  readonly #none: Uint8Array;
  #seq = 0;
  #dropNext = 0;
  #subscribers = 0;
  #subscribed: (() => boolean)[] = [];
  endpoint = '';
  replayEndpoint = '';

  private constructor(options: TestEngineOptions) {
    this.#options = {
      blocks: 64,
      blockSize: 16,
      blockBytes: 256,
      seed: '0',
      encoding: 'map',
      hashForm: 'bytes',
      replayFrames: 'delimited',
      topic: '',
      rank: 0,
      endpoint: 'tcp://127.0.0.1:*',
      clock: () => Date.now() / 1000,
      ...options,
    };
    this.#file = new EngineMemory(this.#options.blocks * this.#options.blockBytes);
    this.memory = this.#file.view;
    this.#free = Array.from({ length: this.#options.blocks }, (_, slot) => this.#options.blocks - 1 - slot);
    this.#none = noneHash(this.#options.seed);
  }

  /** Binds the publisher where `options.endpoint` says, the replay socket on 127.0.0.1 on a port the system picks. */
  static async open(options: TestEngineOptions = {}): Promise<TestEngine> {
    const engine = new TestEngine(options);
    await engine.#publisher.bind(engine.#options.endpoint);
    await engine.#router.bind('tcp://127.0.0.1:*');
    engine.endpoint = engine.#publisher.lastEndpoint!;
    engine.replayEndpoint = engine.#router.lastEndpoint!;
    void engine.#watchSubscriptions();
    void engine.#serveReplays();
    return engine;
  }

  /** Resolves once `count` subscriptions have reached the publisher. */
  waitForSubscribers(count = 1): Promise<void> {
    if (this.#subscribers >= count) return Promise.resolve();
    return new Promise((resolve) =>
      this.#subscribed.push(() => {
        if (this.#subscribers < count) return false;
        resolve();
        return true;
      }),
    );
  }

  /** The block hashes (digests) of a token sequence's full blocks, as this engine computes them. */
  hashes(tokens: readonly number[]): Uint8Array[] {
    const out: Uint8Array[] = [];
    let parent = this.#none;
    for (let i = 0; i + this.#options.blockSize <= tokens.length; i += this.#options.blockSize) {
      parent = blockHash(parent, tokens.slice(i, i + this.#options.blockSize), null);
      out.push(parent);
    }
    return out;
  }

  /** The bytes the engine holds for a block, or undefined if it does not hold it. */
  block(hash: Uint8Array): Buffer | undefined {
    const held = this.#held.get(hexOf(hash));
    const size = this.#options.blockBytes;
    return held && this.memory.subarray(held.slot * size, (held.slot + 1) * size);
  }

  /** Holds the full blocks of `tokens` (those not held yet) and publishes them in one batch, with any evictions first. */
  async store(tokens: readonly number[], medium = 'GPU'): Promise<Uint8Array[]> {
    const hashes = this.hashes(tokens);
    const first = hashes.findIndex((hash) => !this.#held.has(hexOf(hash)));
    if (first < 0) return [];
    const fresh = hashes.slice(first);
    const evictedSlots = this.#slotsOf(
      [...this.#held.values()].slice(0, Math.max(0, fresh.length - this.#free.length)).map((held) => held.hash),
    );
    const evicted = this.#evict(fresh.length - this.#free.length);
    for (const hash of fresh) this.#fill(hash);
    const size = this.#options.blockSize;
    const sequence = { tokens: tokens.slice(0, hashes.length * size), hashes };
    this.#sequences.push(sequence);
    this.#tellSidecar({ sequences: this.#held2sequences([sequence]), removed: evictedSlots });
    const events: EngineEvent[] = [];
    if (evicted.length > 0) events.push({ type: 'BlockRemoved', blockHashes: evicted, medium });
    events.push({
      type: 'BlockStored',
      blockHashes: fresh,
      parentBlockHash: first === 0 ? null : hashes[first - 1]!,
      tokenIds: tokens.slice(first * size, hashes.length * size),
      blockSize: size,
      medium,
    });
    await this.publish(events);
    return fresh;
  }

  /** Drops these blocks and publishes their removal. */
  async remove(hashes: readonly Uint8Array[], medium = 'GPU'): Promise<void> {
    this.#tellSidecar({ removed: this.#slotsOf(hashes) });
    for (const hash of hashes) this.#release(hash);
    await this.publish([{ type: 'BlockRemoved', blockHashes: hashes, medium }]);
  }

  async clear(): Promise<void> {
    this.#tellSidecar({ removed: [...this.#held.values()].map((held) => held.slot) });
    for (const held of [...this.#held.values()]) this.#release(held.hash);
    await this.publish([{ type: 'AllBlocksCleared' }]);
  }

  /** Publishes a batch of events under the next sequence number. */
  async publish(events: readonly EngineEvent[]): Promise<number> {
    const { encoding, hashForm, rank, clock } = this.#options;
    return this.publishPayload(encodeBatch(clock(), events, rank, encoding, hashForm));
  }

  /** Publishes any payload under the next sequence number (kept for replay like any batch). */
  async publishPayload(payload: Uint8Array): Promise<number> {
    const seq = this.#seq++;
    this.#sent.push({ seq, payload });
    if (this.#sent.length > 10_000) this.#sent.shift();
    if (this.#dropNext > 0) this.#dropNext -= 1;
    else await this.#publisher.send([this.#options.topic, seqBytes(seq), payload]);
    return seq;
  }

  /** Sends frames as they are, outside the sequence (a malformed message). */
  async sendFrames(frames: (Buffer | string)[]): Promise<void> {
    await this.#publisher.send(frames);
  }

  /** The next `count` batches are numbered and kept for replay, but never reach the live stream. */
  dropNext(count = 1): void {
    this.#dropNext += count;
  }

  /** Forgets what the publisher sent, as a restarted engine process: its numbering starts at 0 again and it holds nothing. */
  restart(): void {
    this.#seq = 0;
    this.#sent.length = 0;
    this.#tellSidecar({ removed: [...this.#held.values()].map((held) => held.slot) });
    for (const held of [...this.#held.values()]) this.#release(held.hash);
  }

  /**
   * The KV geometry the memory has, as kvreuse describes it: one fully contiguous bank, each block one
   * layer of K and V planes of `blockSize` tokens of one bf16 head (`blockBytes` must be a multiple of
   * 4 × `blockSize`).
   */
  geometry() {
    const { blockSize, blockBytes } = this.#options;
    if (blockBytes % (4 * blockSize) !== 0)
      throw new RangeError(`blockBytes ${blockBytes} is not a multiple of 4 × blockSize ${blockSize}`);
    return {
      numLayers: 1,
      kvPlanes: 2 as const,
      blockTokens: blockSize,
      numKvHeads: 1,
      headDim: blockBytes / (4 * blockSize),
      dtype: 'bf16' as const,
      bankLayout: 'fully-contiguous' as const,
      headOrder: 'NHD' as const,
    };
  }

  /**
   * Hands the engine's memory to the kvreuse sidecar listening at `path` (in another process: the answer
   * is waited for on this thread), with the token sequences it holds; from then on every store, removal
   * and clear is told to the sidecar too. Returns the sidecar's `adopted` answer; throws its refusal.
   */
  adopt(path: string, worker: { readonly workerId: string; readonly incarnation?: string }): Record<string, unknown> {
    if (this.#sidecar !== undefined) throw new Error('the test engine is already adopted');
    const client = new SidecarConnection(path);
    const layout = { ...worker, geometry: this.geometry(), blocks: this.#options.blocks, memory: 'dram' };
    try {
      const answer = client.adopt(this.#file.fd, layout);
      this.#sidecar = client;
      this.#tellSidecar({ sequences: this.#held2sequences(this.#sequences) });
      return answer;
    } catch (error) {
      client.close();
      throw error;
    }
  }

  /** Ends the adoption: the sidecar withdraws the memory (as when the engine dies). */
  detach(): void {
    this.#sidecar?.close();
    this.#sidecar = undefined;
  }

  close(): void {
    this.detach();
    this.#publisher.close();
    this.#router.close();
    this.#file.close();
  }

  /** The sequences among `sequences` whose blocks are all still held, with the slot of each block. */
  #held2sequences(sequences: readonly { tokens: readonly number[]; hashes: readonly Uint8Array[] }[]) {
    return sequences
      .filter(({ hashes }) => hashes.every((hash) => this.#held.has(hexOf(hash))))
      .map(({ tokens, hashes }) => ({ blocks: this.#slotsOf(hashes), tokens }));
  }

  #slotsOf(hashes: readonly Uint8Array[]): number[] {
    return hashes.flatMap((hash) => {
      const held = this.#held.get(hexOf(hash));
      return held === undefined ? [] : [held.slot];
    });
  }

  #tellSidecar(update: { sequences?: object[]; removed?: number[] }): void {
    if (this.#sidecar === undefined) return;
    if ((update.sequences?.length ?? 0) === 0 && (update.removed?.length ?? 0) === 0) return;
    this.#sidecar.send({ type: 'blocks', ...update });
  }

  #fill(hash: Uint8Array): void {
    const slot = this.#free.pop()!;
    const size = this.#options.blockBytes;
    const pattern = createHash('sha256').update(hash).digest();
    for (let at = 0; at < size; at += pattern.length)
      pattern.copy(this.memory, slot * size + at, 0, Math.min(pattern.length, size - at));
    this.#held.set(hexOf(hash), { slot, hash });
  }

  #release(hash: Uint8Array): void {
    const held = this.#held.get(hexOf(hash));
    if (held === undefined) return;
    this.#held.delete(hexOf(hash));
    this.#free.push(held.slot);
  }

  /** Frees `count` blocks, least recently stored first; returns their hashes. */
  #evict(count: number): Uint8Array[] {
    const victims = [...this.#held.values()].slice(0, Math.max(0, count)).map((held) => held.hash);
    for (const hash of victims) this.#release(hash);
    return victims;
  }

  async #watchSubscriptions(): Promise<void> {
    try {
      for await (const [message] of this.#publisher) {
        if (message?.[0] === 1) this.#subscribers += 1;
        this.#subscribed = this.#subscribed.filter((check) => !check());
      }
    } catch {
      // closed
    }
  }

  async #serveReplays(): Promise<void> {
    try {
      for await (const frames of this.#router) {
        const identity = frames[0]!;
        const start = Number(frames[frames.length - 1]!.readBigUInt64BE());
        const head = this.#options.replayFrames === 'delimited' ? [identity, Buffer.alloc(0)] : [identity];
        for (const { seq, payload } of this.#sent)
          if (seq >= start) await this.#router.send([...head, seqBytes(seq), payload]);
        await this.#router.send([...head, endSeq, Buffer.alloc(0)]);
      }
    } catch {
      // closed
    }
  }
}
