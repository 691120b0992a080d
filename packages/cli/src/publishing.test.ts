import { ClusterSecretError, DiscoveryClosedError, type DiscoveryStore, openDiscovery } from '@kvreuse/discovery';
import { CleanupFailedError } from '@kvreuse/errors';
import { describe, expect, it, vi } from 'vitest';
import { startPublishing } from './publishing.js';
import { exitCodeOf } from './run.js';
import { defaultSettings } from './settings/all-settings.js';

const memory = { ...defaultSettings.discovery, backend: 'memory' as const };

/** A memory store that closes, then rejects with `failure`. */
function storeFailingToClose(failure: Error): DiscoveryStore {
  const store = openDiscovery(memory);
  const close = store.close.bind(store);
  vi.spyOn(store, 'close').mockImplementation(async () => {
    await close();
    throw failure;
  });
  return store;
}

describe('a publishing whose start fails and whose store then fails to close', () => {
  it('rejects with the start’s error, which keeps the close’s failure as its cause', async () => {
    const closeFailure = new Error('the store failed to close');
    const store = storeFailingToClose(closeFailure);
    const startFailure = new Error('the start failed');

    await expect(
      startPublishing(store, memory, () => {
        throw startFailure;
      }),
    ).rejects.toBe(startFailure);

    expect(startFailure.cause).toBe(closeFailure);
    await expect(store.get('/workers/')).rejects.toBeInstanceOf(DiscoveryClosedError);
  });

  it('keeps the start error’s own cause first, beside the close’s failure', async () => {
    const closeFailure = new Error('the store failed to close');
    const store = storeFailingToClose(closeFailure);
    const ownCause = new Error('the agent did not answer');
    const startFailure = new Error('the start failed', { cause: ownCause });

    await expect(
      startPublishing(store, memory, async () => {
        throw startFailure;
      }),
    ).rejects.toBe(startFailure);

    expect(startFailure.cause).toEqual(
      expect.objectContaining({
        constructor: AggregateError,
        errors: [ownCause, closeFailure],
        message: 'the agent did not answer; and abandoning the publishing after it failed: the store failed to close',
      }),
    );
  });

  it('rejects with a CleanupFailedError carrying both when the start threw a value that is not an Error', async () => {
    const closeFailure = new Error('the store failed to close');
    const store = storeFailingToClose(closeFailure);

    const rejected = startPublishing(store, memory, () => {
      throw 'no agent' as unknown as Error;
    });

    await expect(rejected).rejects.toBeInstanceOf(CleanupFailedError);
    await expect(rejected).rejects.toMatchObject({
      thrown: 'no agent',
      cleanupFailures: [closeFailure],
      message: 'no agent; and abandoning the publishing after it failed: the store failed to close',
    });
  });

  it('rejects with the cluster secret’s refusal, which keeps the close’s failure as its cause', async () => {
    const closeFailure = new Error('the store failed to close');
    const store = storeFailingToClose(closeFailure);

    await expect(
      startPublishing(store, { ...memory, secretFile: 42 as unknown as string }, () => 'started'),
    ).rejects.toThrow(
      expect.objectContaining({ code: 'CLUSTER_SECRET_REFUSED', secret: 'discovery.secret_file', cause: closeFailure }),
    );
  });

  it('ends the binary as a frozen settings error would have, with the close’s failure kept beside it', async () => {
    const closeFailure = new Error('the store failed to close');
    const store = storeFailingToClose(closeFailure);
    const frozen = Object.freeze(
      new ClusterSecretError('/s', 'is not a regular file', { setting: 'discovery.secret_file' }),
    );

    const rejection: unknown = await startPublishing(store, memory, () => {
      throw frozen;
    }).catch((error: unknown) => error);

    expect(rejection).toMatchObject({ code: 'CLEANUP_FAILED', thrown: frozen });
    expect(exitCodeOf(rejection)).toBe(2);
  });
});
