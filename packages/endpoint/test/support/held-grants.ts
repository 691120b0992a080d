// Pin grants the test gives: a serving worker's ranks answer each pin request only when the test says so.
import { vi } from 'vitest';
import type { PinAdapter } from '../../src/pin-adapter.js';
import type { EndpointCleanups } from './endpoint-cleanups.js';
import type { TestWorker } from './endpoint-workers.js';

/**
 * Holds every pin request at `source`'s ranks until the test grants it: the answer has one grant per
 * request. The test owns the spies (`own`), restored after it.
 */
export function holdGrants(own: EndpointCleanups['own'], source: TestWorker): (() => void)[] {
  const grants: (() => void)[] = [];
  for (const { pool } of source.ranks) {
    const requestPin = pool.requestPin.bind(pool);
    // As an adapter that asks its engine: the grant comes later.
    own(vi.spyOn(pool as PinAdapter, 'requestPin')).mockImplementation(
      (pinId, hashes) => new Promise((resolve) => grants.push(() => resolve(requestPin(pinId, hashes)))),
    );
  }
  return grants;
}
