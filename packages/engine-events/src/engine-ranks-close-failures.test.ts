import { CleanupFailedError } from '@kvreuse/errors';
import { blockHashSalt, RetainedInventory } from '@kvreuse/inventory';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Subscriber } from 'zeromq';
import { EngineInventoryFeed } from './engine-inventory-feed.js';
import { EngineEventSubscriber, subscribeEngineRanks } from './engine-subscriber.js';

const scheme = { salt: blockHashSalt('cd'.repeat(32), 'seed'), blockTokens: 16 };
afterEach(() => {
  vi.restoreAllMocks();
});

/** Every subscriber's close throws, once it has closed. */
function closesFailing(): void {
  const close = EngineEventSubscriber.prototype.close;
  vi.spyOn(EngineEventSubscriber.prototype, 'close').mockImplementation(async function (this: EngineEventSubscriber) {
    await close.call(this);
    throw new Error(`${this.workerId} would not close`);
  });
}

/**
 * Opens two ranks whose closes fail after closing, rank 1's constructor throwing `thrown` once its socket is
 * connected (its socket closed first); resolves with what the rejection carried.
 */
async function rankOneThrowing(engine: string, thrown: unknown): Promise<unknown> {
  const subscribe = Subscriber.prototype.subscribe;
  let subscribed = 0;
  vi.spyOn(Subscriber.prototype, 'subscribe').mockImplementation(function (
    this: Subscriber,
    ...prefixes: Array<string | Buffer>
  ) {
    subscribed++;
    if (subscribed === 1) return subscribe.apply(this, prefixes);
    this.close();
    throw thrown;
  });
  closesFailing();
  const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
  return subscribeEngineRanks({ engine, endpoint: `inproc://${engine}`, ranks: 2, feed }).then(
    () => 'resolved',
    (error: unknown) => error,
  );
}

describe('subscribeEngineRanks, when closing the ranks it had opened fails too', () => {
  it("rejects with the rank's refusal, keeping a close that failed on its cause", async () => {
    const endpoint = `ipc:///tmp/${'n'.repeat(99)}`;
    closesFailing();
    const feed = new EngineInventoryFeed({ inventory: new RetainedInventory(), scheme });
    const refusal = await subscribeEngineRanks({ engine: 'engine-n', endpoint, ranks: 2, feed }).catch(
      (error: unknown) => error as Error,
    );
    expect(refusal).toMatchObject({
      code: 'ENGINE_EVENTS_INVALID_INPUT',
      argument: 'options.endpoint',
      reason: `rank 1 follows ${endpoint}_dp1: ZMQ cannot connect to it: File name too long (ENAMETOOLONG)`,
    });
    const cause = (refusal as Error).cause as AggregateError;
    expect(cause).toBeInstanceOf(AggregateError);
    // The ZMQ refusal's own message first (the refusal's cause), then the close's.
    expect(cause.message).toBe(
      `${(cause.errors[0] as Error).message}; and closing the ranks it had opened after it failed: engine-n/dp0 would not close`,
    );
    expect(cause.errors).toEqual([
      expect.objectContaining({ argument: 'options.endpoint', value: `${endpoint}_dp1` }),
      new Error('engine-n/dp0 would not close'),
    ]);
  });

  it("keeps a close that failed with a rank's frozen error, wrapping it in a CleanupFailedError", async () => {
    const frozen = Object.freeze(new Error('the rank would not subscribe'));
    const rejection = await rankOneThrowing('engine-frozen', frozen);
    expect(rejection).toBeInstanceOf(CleanupFailedError);
    expect(rejection).toMatchObject({
      code: 'CLEANUP_FAILED',
      thrown: frozen,
      cleanupFailures: [new Error('engine-frozen/dp0 would not close')],
      message:
        'the rank would not subscribe; and closing the ranks it had opened after it failed: engine-frozen/dp0 would not close',
    });
    expect(frozen.cause).toBeUndefined();
  });

  it('keeps a close that failed with a rank that threw a value that is not an Error', async () => {
    const rejection = await rankOneThrowing('engine-string', 'no subscription');
    expect(rejection).toBeInstanceOf(CleanupFailedError);
    expect(rejection).toMatchObject({
      thrown: 'no subscription',
      cleanupFailures: [new Error('engine-string/dp0 would not close')],
    });
  });
});
