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

test('an etcd request deadline under 100 ms, which would make a loaded etcd look like an outage, is refused', async () => {
  expect(() => connectEtcdDiscovery({ hosts: 'http://127.0.0.1:2379', requestTimeoutMs: 99 })).toThrow(
    expect.objectContaining({
      code: 'DISCOVERY_INVALID_ARGUMENT',
      backend: 'etcd',
      argument: 'requestTimeoutMs',
      value: 99,
      message: 'etcd discovery: requestTimeoutMs = 99 is refused: requestTimeoutMs is a whole number ≥ 100',
    }),
  );
  // The shortest deadline is taken; making the store connects to nothing yet.
  await connectEtcdDiscovery({ hosts: 'http://127.0.0.1:2379', requestTimeoutMs: 100 }).close();
});

test('store options that are no object, or a clock that is no function, are refused when the store is made', () => {
  const refused = (backend: string, argument: string, value: unknown) =>
    expect.objectContaining({ code: 'DISCOVERY_INVALID_ARGUMENT', backend, argument, value });
  expect(() => new MemoryDiscoveryStore(null as never)).toThrow(refused('memory', 'options', null));
  expect(() => new MemoryDiscoveryStore({ now: 5 as never })).toThrow(refused('memory', 'now', 5));
  expect(() => openSqliteDiscovery(':memory:', null as never)).toThrow(refused('sqlite', 'options', null));
  // A SQLite store took it and failed every lease operation with DiscoveryUnavailableError.
  expect(() => openSqliteDiscovery(':memory:', { now: 5 as never })).toThrow(refused('sqlite', 'now', 5));
  expect(() => connectEtcdDiscovery(undefined as never)).toThrow(refused('etcd', 'options', undefined));
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
