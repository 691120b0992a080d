import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { EndpointMetrics } from '@kvreuse/endpoint';
import { openSqliteDiscovery, type SqliteDiscoveryStore } from '@kvreuse/discovery';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pinsWhere } from '../src/inspect-command.js';
import { runBinary, runInProcess } from './binary.js';
import { type PublishedWorker, publishWorker } from './published-worker.js';

/** The SQLite driver discovery uses, to write another application's database. */
const Database = createRequire(import.meta.url)('better-sqlite3') as new (path: string) => {
  exec(sql: string): void;
  close(): void;
};

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-cli-inspect-'));
const sqlitePath = join(dir, 'discovery.sqlite');
const expiresAt = Date.now() + 3_600_000;
let store: SqliteDiscoveryStore;
const workers: PublishedWorker[] = [];

beforeAll(async () => {
  store = openSqliteDiscovery(sqlitePath);
  workers.push(
    await publishWorker(store, {
      workerId: 'decode-0',
      host: 'node-a',
      inventory: [
        { type: 'stored', tier: 'gpu', blocks: [1n, 2n, 3n], expiresAt },
        { type: 'stored', tier: 'host', blocks: [4n, 5n], expiresAt },
        { type: 'removed', tier: 'gpu', blocks: [3n] },
      ],
    }),
    await publishWorker(store, { workerId: 'decode-half', tpRanks: [1] }),
  );
}, 60_000);

afterAll(async () => {
  for (const worker of workers) await worker.withdraw();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('kvreuse inspect on a SQLite discovery file written by the registry', () => {
  const env = { KVREUSE_DISCOVERY_BACKEND: 'sqlite', KVREUSE_DISCOVERY_SQLITE_PATH: sqlitePath };

  it('--json: the complete worker ready with its two rank parts and inventory per tier; the half-published one not ready, naming the missing rank', async () => {
    const run = await runBinary(['inspect', '--json'], { env });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const report = JSON.parse(run.stdout) as {
      workers: {
        workerId: string;
        ready: boolean;
        reasons: { kind: string; message: string }[];
        rankParts: {
          tpRank: number;
          banks: number;
          memoryKinds: string[];
          bytes: string;
          agentName: string;
          peerMetadataBytes: number;
          signatureBytes: number | null;
          host?: string;
        }[];
        inventory?: { blocks: { gpu: number; host: number } };
      }[];
      pins: { inDiscovery: boolean; note: string; processes: unknown[] };
    };
    expect(report.workers.map((worker) => [worker.workerId, worker.ready])).toEqual([
      ['decode-0', true],
      ['decode-half', false],
    ]);
    const [ready, half] = report.workers as [(typeof report.workers)[number], (typeof report.workers)[number]];
    // Qwen3-0.6B at TP 2: 28 layers × 2 planes = 56 banks per rank, 4 KV heads × 128 × 64 tokens × 2 bytes each.
    expect(ready.rankParts.map((part) => [part.tpRank, part.banks, part.memoryKinds, part.bytes])).toEqual([
      [0, 56, ['dram'], String(56 * 65_536)],
      [1, 56, ['dram'], String(56 * 65_536)],
    ]);
    // The address is the agent's blob; the signature envelope in front of it is reported apart.
    const envelopeBytes = (worker: PublishedWorker, rank: number) =>
      worker.signedMetadataBytes[rank]! - worker.peerMetadataBytes[rank]!;
    expect(
      ready.rankParts.map((part) => [part.agentName, part.peerMetadataBytes, part.signatureBytes, part.host]),
    ).toEqual(
      [0, 1].map((tpRank) => [
        expect.stringMatching(new RegExp(`^decode-0-tp${tpRank}-\\d+$`)),
        workers[0]!.peerMetadataBytes[tpRank],
        envelopeBytes(workers[0]!, tpRank),
        'node-a',
      ]),
    );
    expect(half.rankParts.map((part) => [part.tpRank, part.peerMetadataBytes, part.signatureBytes, part.host])).toEqual(
      [[1, workers[1]!.peerMetadataBytes[0], envelopeBytes(workers[1]!, 0), undefined]],
    );
    expect(ready.inventory?.blocks).toEqual({ gpu: 2, host: 2 });
    expect(report.pins).toEqual({
      inDiscovery: false,
      note: expect.stringContaining('not published to discovery'),
      processes: [],
    });
    expect(half.reasons).toEqual([
      expect.objectContaining({ kind: 'incomplete', message: 'missing ranks (tp 0, pp 0)' }),
    ]);
    expect(half.inventory).toBeUndefined();
  });

  it('prints the same in words', async () => {
    const run = await runBinary(['inspect', '--discovery-sqlite-path', sqlitePath], {
      env: { KVREUSE_DISCOVERY_BACKEND: 'sqlite' },
    });
    expect(run.status).toBe(0);
    expect(run.stdout).toContain(`discovery sqlite ${sqlitePath}: 2 workers, 1 ready\n`);
    expect(run.stdout).toContain('worker decode-0: ready (incarnation inc-1, epoch ');
    expect(run.stdout).toContain('  inventory: gpu 2 blocks, host 2 blocks (advisory; incarnation inc-1, batch 0)\n');
    expect(run.stdout).toMatch(
      new RegExp(
        `^    peer: agent decode-0-tp1-\\d+ generation \\d+, ${workers[0]!.peerMetadataBytes[1]}-byte address \\(signed: ${workers[0]!.signedMetadataBytes[1]! - workers[0]!.peerMetadataBytes[1]!}-byte signature envelope\\), host node-a$`,
        'm',
      ),
    );
    expect(run.stdout).toMatch(
      new RegExp(
        `^    peer: agent decode-half-tp1-\\d+ generation \\d+, ${workers[1]!.peerMetadataBytes[0]}-byte address \\(signed: \\d+-byte signature envelope\\)$`,
        'm',
      ),
    );
    expect(run.stdout.trimEnd().split('\n').at(-1)).toBe(pinsWhere);
    expect(run.stdout).toContain(
      'worker decode-half: not ready (incarnation inc-1)\n  not ready because (incomplete): missing ranks (tp 0, pp 0)\n',
    );
  });

  it('--metrics <url>: the pins each endpoint process serves and holds, read from its /metrics', async () => {
    const metrics = new EndpointMetrics();
    metrics.pinsHeld('serve', 2);
    const listener = await metrics.listen(0);
    try {
      const url = `http://127.0.0.1:${listener.port}/metrics`;
      const json = await runBinary(['inspect', '--json', '--metrics', url], { env });
      expect(json.status).toBe(0);
      expect((JSON.parse(json.stdout) as { pins: unknown }).pins).toEqual({
        inDiscovery: false,
        note: pinsWhere,
        processes: [{ url, serving: 2, holding: 0 }],
      });
      const words = await runBinary(['inspect', '--metrics', url], { env });
      expect(words.stdout.endsWith(`${pinsWhere}\n  ${url}: serving 2 pins to readers, holding 0 at sources\n`)).toBe(
        true,
      );
    } finally {
      await listener.close();
    }
    const gone = await runBinary(['inspect', '--metrics', `http://127.0.0.1:${listener.port}/metrics`], { env });
    expect(gone).toMatchObject({ status: 1, stdout: '' });
    expect(gone.stderrLines).toEqual([
      expect.stringMatching(
        /^kvreuse: metrics at http:\/\/127\.0\.0\.1:\d+\/metrics: connect ECONNREFUSED .* \[METRICS_UNAVAILABLE\]$/,
      ),
    ]);
  }, 60_000);

  it("with a declared profile installed as the admission gate, a worker it refuses is not ready, with the gate's reasons", async () => {
    const run = await runBinary(['inspect', '--json', '--profile-name', 'llama-3.1-8b-bf16-b64'], { env });
    expect(run.status).toBe(0);
    const report = JSON.parse(run.stdout) as {
      workers: { workerId: string; ready: boolean; reasons: { kind: string; gate?: string; message: string }[] }[];
    };
    const [refused] = report.workers;
    expect(refused).toMatchObject({ workerId: 'decode-0', ready: false });
    expect(refused!.reasons).toEqual([
      expect.objectContaining({
        kind: 'gate',
        gate: 'profile llama-3.1-8b-bf16-b64',
        message: expect.stringContaining('worker decode-0: geometry.numLayers: expected 32, actual 28'),
      }),
    ]);
  });

  it('profiles check --worker-id admits the worker found in discovery against the Qwen3-0.6B profile', async () => {
    const run = await runBinary(['profiles', 'check', 'qwen3-0.6b-bf16-b64', '--worker-id', 'decode-0'], { env });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^admitted: profile qwen3-0.6b-bf16-b64 v3 against workers decode-0, native /);
  });

  it('a SQLite file that does not exist is refused with exit 2, and not created', async () => {
    const missing = join(dir, 'nothing-here.sqlite');
    const run = await runBinary(['inspect', '--discovery-sqlite-path', missing], {
      env: { KVREUSE_DISCOVERY_BACKEND: 'sqlite' },
    });
    expect(run.status).toBe(2);
    expect(run.stderrLines).toEqual([
      `kvreuse: discovery.sqlite_path = ${missing}: no such file (no worker has published to it; set --discovery-sqlite-path) [DISCOVERY_NOT_FOUND]`,
    ]);
    expect(run.stdout).toBe('');
    expect(existsSync(missing)).toBe(false);
  });

  it.each(['notaurl', 'ftp://127.0.0.1/metrics'])(
    '--metrics %s, not an http(s) URL, is refused with exit 2 before discovery is read',
    async (url) => {
      const run = await runInProcess(['inspect', '--metrics', url], { env });
      expect(run.stderrLines).toEqual([
        `kvreuse: inspect: --metrics is an http:// or https:// URL (http://host:port/metrics), not ${JSON.stringify(url)} (see kvreuse inspect --help) [USAGE]`,
      ]);
      expect(run.status).toBe(2);
      expect(run.stdout).toBe('');
    },
  );

  it('a SQLite path that is a directory is refused with exit 2, naming it', async () => {
    const run = await runInProcess(['inspect', '--discovery-sqlite-path', dir], {
      env: { KVREUSE_DISCOVERY_BACKEND: 'sqlite' },
    });
    expect(run.stderrLines).toEqual([
      `kvreuse: ${dir}: a directory, not a SQLite discovery file (set --discovery-sqlite-path) [INPUT_FILE]`,
    ]);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe('');
  });

  it('a SQLite path below a file, a FIFO, or one with a name too long is refused with exit 2, naming the setting', async () => {
    writeFileSync(join(dir, 'plain.txt'), '');
    execFileSync('mkfifo', [join(dir, 'fifo.sqlite')]);
    const longName = join(dir, `${'a'.repeat(300)}.sqlite`);
    const refusal = async (path: string): Promise<readonly string[]> => {
      const run = await runInProcess(['inspect', '--discovery-sqlite-path', path], {
        env: { KVREUSE_DISCOVERY_BACKEND: 'sqlite' },
      });
      expect(run.status).toBe(2);
      expect(run.stdout).toBe('');
      return run.stderrLines;
    };
    expect(await refusal(join(dir, 'plain.txt', 'd.sqlite'))).toEqual([
      `kvreuse: ${join(dir, 'plain.txt', 'd.sqlite')}: its folder ${join(dir, 'plain.txt')} is not a directory (set --discovery-sqlite-path) [INPUT_FILE]`,
    ]);
    expect(await refusal(join(dir, 'fifo.sqlite'))).toEqual([
      `kvreuse: ${join(dir, 'fifo.sqlite')}: not a regular file, so not a SQLite discovery file (set --discovery-sqlite-path) [INPUT_FILE]`,
    ]);
    expect(await refusal(longName)).toEqual([
      `kvreuse: ${longName}: cannot be looked up: a name in it is longer than the file system allows (set --discovery-sqlite-path) [INPUT_FILE]`,
    ]);
  });

  it('a SQLite path that is a file but not a database is refused with exit 2, naming the setting, and left as it was', async () => {
    const text = join(dir, 'text.sqlite');
    const content = 'not a database, and longer than a header';
    writeFileSync(text, content);
    const run = await runInProcess(['inspect', '--discovery-sqlite-path', text], {
      env: { KVREUSE_DISCOVERY_BACKEND: 'sqlite' },
    });
    expect(run.stderrLines).toEqual([
      `kvreuse: ${text}: not a SQLite database, so not a SQLite discovery file (set --discovery-sqlite-path) [INPUT_FILE]`,
    ]);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe('');
    expect(readFileSync(text, 'utf8')).toBe(content);
    expect(readdirSync(dir).filter((name) => name.startsWith('text.sqlite'))).toEqual(['text.sqlite']);
  });

  it("another application's SQLite database is refused with exit 2, naming its tables and the setting, and left as it was", async () => {
    const app = join(dir, 'app.sqlite');
    const other = new Database(app);
    other.exec('CREATE TABLE users (id INTEGER PRIMARY KEY)');
    other.close();
    const before = readFileSync(app);
    const run = await runInProcess(['inspect', '--discovery-sqlite-path', app], {
      env: { KVREUSE_DISCOVERY_BACKEND: 'sqlite' },
    });
    expect(run.stderrLines).toEqual([
      `kvreuse: ${app}: a SQLite database of something else (its tables: users), not a discovery database, so not a SQLite discovery file (set --discovery-sqlite-path) [INPUT_FILE]`,
    ]);
    expect(run.status).toBe(2);
    expect(readFileSync(app).equals(before)).toBe(true);
    expect(readdirSync(dir).filter((name) => name.startsWith('app.sqlite'))).toEqual(['app.sqlite']);
  });

  it('a SQLite discovery file of a newer schema version is refused with exit 2, advising an upgrade, and left as it was', async () => {
    const newer = join(dir, 'newer.sqlite');
    await openSqliteDiscovery(newer).close();
    const writer = new Database(newer);
    writer.exec('PRAGMA user_version = 2');
    writer.close();
    const before = readFileSync(newer);
    const run = await runInProcess(['inspect', '--discovery-sqlite-path', newer], {
      env: { KVREUSE_DISCOVERY_BACKEND: 'sqlite' },
    });
    expect(run.stderrLines).toEqual([
      `kvreuse: ${newer}: a SQLite discovery file of schema version 2, newer than version 1, the newest this kvreuse reads (upgrade kvreuse to read it, or set --discovery-sqlite-path) [INPUT_FILE]`,
    ]);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe('');
    expect(readFileSync(newer).equals(before)).toBe(true);
  });

  it('the memory backend is refused with exit 2: another process can never read it', async () => {
    const run = await runBinary(['inspect', '--discovery-backend', 'memory']);
    expect(run.status).toBe(2);
    expect(run.stderrLines).toEqual([
      expect.stringMatching(/^kvreuse: inspect: discovery.backend = memory holds one process only; .* \[USAGE\]$/),
    ]);
  });
});
