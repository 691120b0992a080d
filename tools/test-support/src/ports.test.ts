import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { portClaims, portIsFree, portsBelowEphemeral, reservePorts } from './ports.js';

async function listenable(port: number): Promise<void> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
  await new Promise((resolve) => server.close(resolve));
}

/** A port of 5,000–9,999 (a range no default reservation draws from) that nothing listens on or claims. */
async function quietPort(): Promise<number> {
  mkdirSync(portClaims, { recursive: true });
  for (;;) {
    const port = 5_000 + Math.floor(Math.random() * 5_000);
    const claimed = readdirSync(portClaims).some((file) => file.startsWith(`${port}.`));
    if (!claimed && (await portIsFree(port))) return port;
  }
}

describe('reservePorts', () => {
  it('hands out consecutive ports below the ephemeral range that can be listened on, never one twice in a process', async () => {
    const { lowest, ceiling } = portsBelowEphemeral();
    const first = await reservePorts(3);
    const second = await reservePorts(3);
    for (const start of [first, second]) {
      expect(start).toBeGreaterThanOrEqual(lowest);
      expect(start + 2).toBeLessThan(ceiling);
      for (const port of [start, start + 1, start + 2]) await listenable(port);
    }
    expect(Math.abs(first - second)).toBeGreaterThanOrEqual(3);
    await expect(reservePorts(1, { lowest: first, ceiling: first + 1 })).rejects.toThrow(
      `no 1 consecutive ports free and unclaimed in ${first}-${first}`,
    );
  });

  it('does not hand out a port another live process claimed, and takes over the claim of a process that ended', async () => {
    const port = await quietPort();
    const other = spawn('sleep', ['30']);
    await once(other, 'spawn');
    const theirs = join(portClaims, `${port}.${other.pid}`);
    writeFileSync(theirs, '');
    await expect(reservePorts(1, { lowest: port, ceiling: port + 1 })).rejects.toThrow(`in ${port}-${port}`);
    expect(existsSync(theirs)).toBe(true);
    other.kill('SIGKILL');
    await once(other, 'exit');
    expect(await reservePorts(1, { lowest: port, ceiling: port + 1 })).toBe(port);
    expect(existsSync(theirs)).toBe(false);
    expect(existsSync(join(portClaims, `${port}.${process.pid}`))).toBe(true);
  });

  it('does not hand out a port something listens on', async () => {
    const port = await quietPort();
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    try {
      await expect(reservePorts(1, { lowest: port, ceiling: port + 1 })).rejects.toThrow(`in ${port}-${port}`);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
