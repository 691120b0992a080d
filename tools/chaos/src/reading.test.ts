import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ChaosInvariantError } from './errors.js';
import { pullPinsHeld, untilReading } from './reading.js';

const metrics = (pull: number) =>
  `# TYPE kvreuse_pins_held gauge\nkvreuse_pins_held{side="serve",worker="chaos-prefill",rank="tp0"} 5\nkvreuse_pins_held{side="pull",worker="chaos-prefill",rank="tp0"} ${pull}\n`;

/** A metrics listener whose pull pins are what `pull()` says at each scrape; resolves with its URL and a close. */
async function serving(pull: () => number): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((_, response) => response.end(metrics(pull())));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/metrics`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('the prefill reading, from its metrics', () => {
  it('reads the pull side of kvreuse_pins_held, and refuses metrics without it', () => {
    expect(pullPinsHeld(3, metrics(2))).toBe(2);
    expect(() => pullPinsHeld(3, 'kvreuse_banks{state="registered"} 56\n')).toThrow(ChaosInvariantError);
  });

  it('resolves true at the first scrape that shows pull pins held', async () => {
    let scrapes = 0;
    const listener = await serving(() => (++scrapes < 3 ? 0 : 2));
    try {
      expect(await untilReading(3, listener.url, new Promise(() => undefined))).toBe(true);
      expect(scrapes).toBe(3);
    } finally {
      await listener.close();
    }
  });

  it('resolves false once the pull has ended without a scrape showing pull pins, whether it ended well or not', async () => {
    const listener = await serving(() => 0);
    try {
      expect(await untilReading(3, listener.url, Promise.resolve())).toBe(false);
      expect(await untilReading(3, listener.url, Promise.reject(new Error('pull failed')))).toBe(false);
    } finally {
      await listener.close();
    }
  });
});
