import { connectEtcdDiscovery, type EtcdDiscoveryStore } from '@kvreuse/discovery';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reservePorts } from '@kvreuse-internal/test-support';
import { runBinary } from './binary.js';
import { type RunningEtcd, startEtcd } from './etcd.js';
import { type PublishedWorker, publishWorker } from './published-worker.js';

describe('kvreuse inspect on a real etcd', () => {
  let etcd: RunningEtcd;
  let store: EtcdDiscoveryStore;
  let worker: PublishedWorker;

  beforeAll(async () => {
    etcd = await startEtcd();
    store = connectEtcdDiscovery({ hosts: etcd.url });
    worker = await publishWorker(store, {
      workerId: 'decode-etcd',
      inventory: [{ type: 'stored', tier: 'host', blocks: [7n, 8n, 9n], expiresAt: Date.now() + 3_600_000 }],
    });
  }, 60_000);

  afterAll(async () => {
    await worker?.withdraw();
    await store?.close();
    await etcd?.stop();
  });

  it('finds the worker the registry published, ready, with its rank parts and inventory', async () => {
    const run = await runBinary(['inspect', '--discovery-backend', 'etcd', '--discovery-etcd-endpoints', etcd.url]);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toContain(`discovery etcd ${etcd.url}: 1 workers, 1 ready\n`);
    expect(run.stdout).toMatch(
      /worker decode-etcd: ready \(incarnation inc-1, epoch \d+\)\n  rank tp0\/pp0: decode, incarnation inc-1, epoch \d+, 56 banks \(dram\) 3,670,016 bytes\n {4}peer: agent decode-etcd-tp0-\d+ generation 57, \d+-byte address \(signed: \d+-byte signature envelope\)\n/,
    );
    expect(run.stdout).toContain('  inventory: gpu 0 blocks, host 3 blocks (advisory; incarnation inc-1, batch 0)\n');
  });

  it('an etcd that accepts connections and never answers (SIGSTOP): exit 1 and one line once the request deadline passes, never a hang', async () => {
    await etcd.pause();
    try {
      const run = await runBinary(['inspect', '--discovery-backend', 'etcd', '--discovery-etcd-endpoints', etcd.url]);
      expect(run).toMatchObject({ status: 1, stdout: '' });
      expect(run.stderrLines).toEqual([
        expect.stringMatching(/^kvreuse: etcd discovery: .*\[DISCOVERY_UNAVAILABLE\]$/),
      ]);
    } finally {
      etcd.resume();
    }
  }, 60_000);
});

describe('kvreuse inspect against an etcd that nothing listens on', () => {
  it('fails with exit 1 and one line naming discovery as unavailable, within the request timeout', async () => {
    const url = `http://127.0.0.1:${await reservePorts(1)}`;
    const run = await runBinary(['inspect', '--discovery-backend', 'etcd', '--discovery-etcd-endpoints', url]);
    expect(run.status).toBe(1);
    expect(run.stderrLines).toEqual([expect.stringMatching(/^kvreuse: .*\[DISCOVERY_UNAVAILABLE\]$/)]);
    expect(run.stdout).toBe('');
  }, 30_000);
});
