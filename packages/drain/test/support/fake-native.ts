// An in-memory stand-in for the native layer, used ONLY to run the model-based test's thousands of
// interleavings fast. It enforces what libkvreuse_transport enforces (deregistration and agent
// destruction refused while operations are in progress, release refused while in progress, released
// ids unknown) and records every violation the layers above commit.
import type { LedgerAgent, NativeOperation } from '../../src/index.js';

export interface FakeRegion {
  readonly id: number;
  readonly address: bigint;
  readonly bytes: number;
  deregistered: boolean;
  deregister(): Promise<void>;
}

export interface FakePeer {
  readonly id: number;
  generation: bigint;
  state: 'ready' | 'invalidated' | 'disconnected';
  info(): { state: 'ready' | 'invalidated' | 'disconnected' };
  invalidate(): void;
}

export interface FakeRequest {
  readonly peer: FakePeer;
  readonly localRegions: readonly FakeRegion[];
  readonly remoteRegions: readonly number[];
}

export type CancelMode = 'immediate' | 'deferred';

class NativeError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export class FakeOperation implements NativeOperation {
  readonly done: Promise<{ bytesDone: number }>;
  state: 'in-progress' | 'done' | 'failed' = 'in-progress';
  code: string | undefined;
  released = false;
  cancelRequested = false;
  #resolve!: (value: { bytesDone: number }) => void;
  #reject!: (error: Error) => void;

  constructor(
    readonly native: FakeNative,
    readonly id: bigint,
    readonly regions: readonly FakeRegion[],
    readonly cancelMode: CancelMode,
  ) {
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.done.catch(() => {});
  }

  complete(): void {
    if (this.state !== 'in-progress') return;
    this.state = 'done';
    this.#resolve({ bytesDone: 4096 });
  }

  fail(code: string): void {
    if (this.state !== 'in-progress') return;
    this.state = 'failed';
    this.code = code;
    this.#reject(new NativeError(code, `operation ${this.id} ended with ${code}`));
  }

  cancel(): 'requested' | 'already-terminal' {
    this.#assertKnown('cancel');
    if (this.state !== 'in-progress') return 'already-terminal';
    this.cancelRequested = true;
    if (this.cancelMode === 'immediate') this.fail('CANCELED');
    return 'requested';
  }

  status() {
    this.#assertKnown('status');
    return this.code === undefined
      ? { state: this.state, bytesDone: 0 }
      : { state: this.state, code: this.code, bytesDone: 0 };
  }

  release(): void {
    this.#assertKnown('release');
    if (this.state === 'in-progress') throw new NativeError('BUSY', `operation ${this.id} is in progress`);
    this.released = true;
  }

  #assertKnown(call: string): void {
    if (this.released) {
      this.native.violations.push(`${call} of released operation ${this.id}`);
      throw new NativeError('NOT_FOUND', `operation ${this.id} was released`);
    }
  }
}

export class FakeNative {
  readonly violations: string[] = [];
  readonly operations: FakeOperation[] = [];
  readonly regions: FakeRegion[] = [];
  closed = false;
  #nextOp = 1n;
  #nextRegion = 1;
  /** Cancel behaviour of the next post. */
  nextCancelMode: CancelMode = 'deferred';

  readonly agent: LedgerAgent<FakeRequest> & {
    register(range: { address: bigint | number; bytes: bigint | number }): FakeRegion;
    close(): Promise<void>;
  } = {
    name: 'fake',
    post: (request) => {
      if (this.closed) throw new NativeError('NOT_FOUND', 'agent closed');
      for (const region of request.localRegions) {
        if (region.deregistered) throw new NativeError('INVALID_PARAM', `region ${region.id} is not registered`);
      }
      if (request.peer.state !== 'ready') throw new NativeError('NOT_FOUND', 'peer not ready');
      const operation = new FakeOperation(this, this.#nextOp++, request.localRegions, this.nextCancelMode);
      this.operations.push(operation);
      return operation;
    },
    register: (range) => {
      const native = this;
      const region: FakeRegion = {
        id: this.#nextRegion++,
        address: BigInt(range.address),
        bytes: Number(range.bytes),
        deregistered: false,
        async deregister() {
          if (region.deregistered) {
            native.violations.push(`region ${region.id} deregistered twice`);
            throw new NativeError('NOT_FOUND', `region ${region.id}`);
          }
          const busy = native.operations.find((op) => op.state === 'in-progress' && op.regions.includes(region));
          if (busy !== undefined) {
            native.violations.push(
              `deregistration of region ${region.id} attempted while operation ${busy.id} is in progress`,
            );
            throw new NativeError('BUSY', `region ${region.id} is used by operation ${busy.id}`);
          }
          region.deregistered = true;
        },
      };
      this.regions.push(region);
      return region;
    },
    close: async () => {
      if (this.counters().liveRegistrations > 0 || this.counters().liveOperations > 0) {
        throw new NativeError('BUSY', 'agent has registrations or operations');
      }
      this.closed = true;
    },
  };

  counters() {
    return {
      liveRegistrations: this.regions.filter((region) => !region.deregistered).length,
      liveOperations: this.operations.filter((op) => !op.released).length,
      inflightOperations: this.operations.filter((op) => op.state === 'in-progress').length,
    };
  }

  peer(id: number): FakePeer {
    const peer: FakePeer = {
      id,
      generation: 1n,
      state: 'ready',
      info: () => ({ state: peer.state }),
      invalidate: () => {
        peer.state = 'invalidated';
      },
    };
    return peer;
  }
}
