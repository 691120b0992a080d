import { Dealer } from 'zeromq';

/** The sequence number a publisher's replay ends with: 2^64 − 1 (vLLM writes −1 as 8 signed bytes). */
export const replayEndSeq = (1n << 64n) - 1n;

/** One batch a replay sent, or the frames it sent that are not one. */
export type ReplayReply =
  | { readonly kind: 'batch'; readonly seq: bigint; readonly payload: Uint8Array }
  | { readonly kind: 'malformed'; readonly reason: string };

export function sequenceBytes(seq: bigint): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64BE(seq);
  return bytes;
}

/** Reads a replay reply: `[topic or empty, seq, payload]` (current vLLM) or `[seq, payload]` (older). */
function replyOf(frames: Buffer[]): ReplayReply | 'end' {
  const [seqFrame, payload] = frames.length === 3 ? [frames[1], frames[2]] : frames.length === 2 ? frames : [];
  if (seqFrame === undefined || payload === undefined)
    return { kind: 'malformed', reason: `a replay reply is 2 or 3 frames, not ${frames.length}` };
  if (seqFrame.length !== 8)
    return { kind: 'malformed', reason: `a sequence number is 8 bytes, not ${seqFrame.length}` };
  const seq = seqFrame.readBigUInt64BE();
  return seq === replayEndSeq ? 'end' : { kind: 'batch', seq, payload };
}

/**
 * Asks a publisher's replay socket (a ROUTER) for the batches it still holds from `start` on, over a
 * DEALER: the request is an empty delimiter and the 8-byte big-endian start; the replies end with
 * sequence 2^64 − 1. A reply that does not come within `timeoutMs` ends the replay (the socket is
 * then replaced, so that its late replies are never read as another replay's).
 */
export class ReplayClient {
  #dealer: Dealer | undefined;

  /** Connects at once, so that an endpoint ZMQ cannot connect to is thrown here, not at the first gap. */
  constructor(
    readonly endpoint: string,
    private readonly timeoutMs: number,
  ) {
    this.#socket();
  }

  /** Yields every reply up to the end marker; returns false if the publisher stopped answering. */
  async *replay(start: bigint): AsyncGenerator<ReplayReply, boolean> {
    const dealer = this.#socket();
    await dealer.send([Buffer.alloc(0), sequenceBytes(start)]);
    for (;;) {
      let frames: Buffer[];
      try {
        frames = await dealer.receive();
      } catch {
        this.#drop();
        return false;
      }
      const reply = replyOf(frames);
      if (reply === 'end') return true;
      yield reply;
    }
  }

  close(): void {
    this.#drop();
  }

  #socket(): Dealer {
    if (this.#dealer === undefined) {
      const dealer = new Dealer({ receiveTimeout: this.timeoutMs, linger: 0 });
      try {
        dealer.connect(this.endpoint);
      } catch (error) {
        dealer.close();
        throw error;
      }
      this.#dealer = dealer;
    }
    return this.#dealer;
  }

  #drop(): void {
    this.#dealer?.close();
    this.#dealer = undefined;
  }
}
