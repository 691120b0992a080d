import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteDiscovery } from '@kvreuse/discovery';
import { afterAll, describe, expect, it } from 'vitest';
import { DemoProcessError } from '../errors.js';
import { readyWorker } from './ready-worker.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-ready-worker-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('readyWorker', () => {
  it('refuses a worker discovery holds no rank of, saying why', async () => {
    const discovery = openSqliteDiscovery(join(dir, 'empty.sqlite'));
    try {
      const reading = readyWorker(discovery, 'decode-9');
      await expect(reading).rejects.toBeInstanceOf(DemoProcessError);
      await expect(reading).rejects.toThrow(/^demo process decode-9 is not ready: /);
    } finally {
      await discovery.close();
    }
  });
});
