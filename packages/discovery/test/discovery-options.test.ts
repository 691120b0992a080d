import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import {
  connectEtcdDiscovery,
  DiscoveryArgumentError,
  DiscoveryUnavailableError,
  MemoryDiscoveryStore,
  openSqliteDiscovery,
} from '../src/index.js';

test('store options out of range are refused, naming the option and value', () => {
  expect(() => new MemoryDiscoveryStore({ historyRevisions: 0 })).toThrow(
    expect.objectContaining({
      code: 'DISCOVERY_INVALID_ARGUMENT',
      backend: 'memory',
      argument: 'historyRevisions',
      value: 0,
    }),
  );
  expect(() => openSqliteDiscovery(':memory:', { pollIntervalMs: -5 })).toThrow(
    expect.objectContaining({ backend: 'sqlite', argument: 'pollIntervalMs', value: -5 }),
  );
  expect(() => connectEtcdDiscovery({ hosts: [] })).toThrow(
    expect.objectContaining({ backend: 'etcd', argument: 'hosts' }),
  );
  expect(() => connectEtcdDiscovery({ hosts: '127.0.0.1:2379' })).toThrow(DiscoveryArgumentError);
  expect(() => connectEtcdDiscovery({ hosts: 'http://127.0.0.1:2379', requestTimeoutMs: 1.5 })).toThrow(
    expect.objectContaining({ argument: 'requestTimeoutMs', value: 1.5 }),
  );
});

test('a SQLite file that cannot be opened is reported with its path', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvreuse-sqlite-open-'));
  try {
    const error = (() => {
      try {
        openSqliteDiscovery(join(dir, 'missing-dir', 'store.db'));
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(DiscoveryUnavailableError);
    expect((error as Error).message).toContain('missing-dir');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
