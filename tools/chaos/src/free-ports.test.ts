import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { portsBelowEphemeral } from '@kvreuse-internal/test-support';
import { freePortRun } from './free-ports.js';

describe('freePortRun', () => {
  it('finds consecutive ports that can each be listened on', async () => {
    const first = await freePortRun(1, 3);
    expect(first).toBeGreaterThanOrEqual(portsBelowEphemeral().lowest);
    expect(first + 2).toBeLessThan(portsBelowEphemeral().ceiling);
    for (const port of [first, first + 1, first + 2]) {
      const server = createServer();
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
