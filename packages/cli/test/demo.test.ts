// `kvreuse demo` as a user runs it: the built binary, its output and its user errors. The pull itself is
// checked in src/demo/main-job.test.ts, where the router's clock can stand still.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import type { DemoSummary } from '../src/demo/demo-summary.js';
import { repoRoot, runBinary, startBinary, unboundedLookup, unhurriedTransport } from './binary.js';
import { startEtcd } from './etcd.js';
import { reservePorts } from '@kvreuse-internal/test-support';

const anywhere = mkdtempSync(join(tmpdir(), 'kvreuse-cli-demo-'));
afterAll(() => rmSync(anywhere, { recursive: true, force: true }));

const lastLine = (stdout: string): string => stdout.trimEnd().split('\n').at(-1) as string;

/** A temporary directory of the run's own (its TMPDIR), so that what the run leaves there can be listed. */
function runTmpdir(): string {
  return mkdtempSync(join(anywhere, 'tmp-'));
}

/** The pids of every process one of whose command-line arguments satisfies `matches`. */
function processesWith(matches: (argument: string) => boolean): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').some(matches);
      } catch {
        return false; // it ended while the list was read
      }
    })
    .map(Number);
}

/** The etcd serving from `dataDir`. */
const etcdProcessesOf = (dataDir: string): number[] =>
  processesWith((argument) => argument === `--data-dir=${dataDir}`);
/** The demo's rank processes of a run whose TMPDIR is `tmp` (their options name its SQLite file there). */
const rankProcessesIn = (tmp: string): number[] =>
  processesWith((argument) => argument.startsWith('{') && argument.includes(`${tmp}/`));

const localEtcdLine =
  /^discovery: started a local etcd at (http:\/\/127\.0\.0\.1:\d+) for this run \(data in (\S+); stopped and removed when the run ends\)$/;

describe('kvreuse demo', () => {
  // The router's decision depends on no clock when reuse is off: the job runs to its end without a pull.
  it('with reuse off, --json prints the summary document and nothing else on stdout: both requests recomputed, no pull, every process drained', async () => {
    const run = await runBinary(['demo', '--json', '--no-router-enable-decode-to-prefill-reuse'], { cwd: anywhere });
    expect(run.status).toBe(0);
    // stderr holds the progress and the request log: one readable line per request, each recomputed for the router's reason.
    expect(run.stderrLines).toContain(
      'turn 1: prefill computes 40 blocks and WRITEs them to both decode ranks (TP 1 → TP 2)',
    );
    expect(run.stderrLines).toContain('pull: none, the router recomputes turn 2');
    // No settings file named and none in the working directory: the bundled example, said so.
    expect(run.stderrLines).toContainEqual(
      expect.stringMatching(
        /^settings file: the bundled example \S+kvreuse\.yaml \(no --config, KVREUSE_CONFIG or \.\/kvreuse\.yaml\)$/,
      ),
    );
    expect(run.stderrLines.filter((line) => line.startsWith('request served: '))).toEqual(
      ['turn 2', 'short request'].map(
        (request) =>
          `request served: ${request}: recompute (disabled), recomputed: router.enable_decode_to_prefill_reuse is off`,
      ),
    );
    const summary = JSON.parse(run.stdout) as DemoSummary;
    expect(summary).toMatchObject({ pull: null, killedRank: null, handOff: { blocks: 40, bytes: 40 * 7_340_032 } });
    expect(
      summary.decisions.map(({ request, action, reason, detail }) => ({ request, action, reason, detail })),
    ).toEqual(
      ['turn 2', 'short request'].map((request) => ({
        request,
        action: 'recompute',
        reason: 'disabled',
        detail: 'router.enable_decode_to_prefill_reuse is off',
      })),
    );
    expect(summary.drain.map((row) => [row.process, row.exitCode, row.banksReturned, row.banksRetained])).toEqual([
      ['qwen3-0.6b-decode-0/tp0', 0, 56, 0],
      ['qwen3-0.6b-decode-0/tp1', 0, 56, 0],
      ['qwen3-0.6b-prefill-0/tp0', 0, 56, 0],
    ]);
  }, 120_000);

  it('without -o, the progress and then the one-line summary on stdout; --log-format json: one pino JSON line per request on stderr', async () => {
    const run = await runBinary(['demo', '--no-router-enable-decode-to-prefill-reuse', '--log-format', 'json'], {
      cwd: anywhere,
    });
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('pull: none, the router recomputes turn 2\n');
    expect(run.stderrLines.map((line) => JSON.parse(line) as unknown)).toEqual(
      ['turn 2', 'short request'].map((request) =>
        expect.objectContaining({
          level: 30,
          msg: 'request served',
          request,
          action: 'recompute',
          reason: 'disabled',
          pull: null,
          recomputed: { blocks: null, reasons: ['router.enable_decode_to_prefill_reuse is off'] },
        }),
      ),
    );
    expect(lastLine(run.stdout)).toBe(
      'kvreuse demo: no pull; turn 2 recompute (disabled), short request recompute (disabled); gpu reuse refused; 3 processes drained, 168 banks returned, 0 retained, 0 pins waited for (0 released)',
    );
  }, 120_000);

  it("as the README's Getting started says: turn 2 pulled, the short request too short, turn 2 pulled again once calibrated; every block verified", async () => {
    // The README's account: the rows of its table of decisions, `| request | decision (reason) | why |`.
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    const account = [
      ...readme.matchAll(/^\| (turn 2|short request|turn 2, calibrated) \| (pull|recompute) \(([a-z-]+)\) \|/gm),
    ].map(([, request, action, reason]) => [request, action, reason]);
    expect(account).toHaveLength(3);
    const run = await runBinary(['demo', '-o', 'json', ...unhurriedTransport, ...unboundedLookup], { cwd: anywhere });
    expect(run.status).toBe(0);
    const summary = JSON.parse(run.stdout) as DemoSummary;
    const decisions = [...summary.decisions, ...(summary.calibration === null ? [] : [summary.calibration.decision])];
    expect(decisions.map(({ request, action, reason }) => [request, action, reason])).toEqual(account);
    expect(summary.pull).toMatchObject({ blocks: 42, bytes: 308_281_344, verified: true, recomputedBlocks: 0 });
    // The priors it printed: measured and derived on this machine, not the settings' defaults.
    expect([summary.priors.blockUs.source, summary.priors.prefillTokenUs.source]).toEqual(['measured', 'derived']);
    expect(run.stderrLines).toContainEqual(
      expect.stringMatching(/^priors: a block over the link [\d,]+ µs \(measured: /),
    );
  }, 120_000);

  it('--unbounded-lookup: the lookup budget is priced into the pull but never passed, even at 0 ms', async () => {
    const run = await runBinary(
      [
        'demo',
        '--backend',
        'loopback',
        '-o',
        'json',
        '--router-transfer-source-lookup-budget-ms',
        '0',
        ...unhurriedTransport,
        ...unboundedLookup,
      ],
      { cwd: anywhere },
    );
    expect(run.status).toBe(0);
    const summary = JSON.parse(run.stdout) as DemoSummary;
    expect(summary.decisions.map(({ request, action, reason }) => [request, action, reason])).toEqual([
      ['turn 2', 'pull', 'worth-it'],
      ['short request', 'recompute', 'too-short'],
    ]);
    expect(summary.pull).toMatchObject({ blocks: 42, verified: true });
  }, 120_000);

  it('--hold: the router (this process) and the ranks still running serve their metrics until SIGTERM, then every process drains and nothing is left', async () => {
    const tmp = runTmpdir();
    const port = await reservePorts(4);
    const started = startBinary(
      ['demo', '--hold', '--endpoint-metrics-port', String(port), ...unhurriedTransport, ...unboundedLookup],
      {
        cwd: anywhere,
        env: { TMPDIR: tmp },
      },
    );
    await started.stdoutLine(/^holding: /);
    // The router's decisions, where it runs: turn 2, the short request and turn 2 again, one sample each.
    const router = await (await fetch(`http://127.0.0.1:${port + 3}/metrics`)).text();
    const decisions = [
      ...router.matchAll(/^kvreuse_route_decisions_total\{action="(pull|recompute)",reason="[a-z-]+"\} (\d+)$/gm),
    ];
    expect(decisions.reduce((sum, [, , count]) => sum + Number(count), 0)).toBe(3);
    // The prefill rank still serves its endpoint's, without a router counter.
    const prefill = await (await fetch(`http://127.0.0.1:${port + 2}/metrics`)).text();
    expect(prefill).toContain('kvreuse_endpoint_state');
    expect(prefill).not.toContain('kvreuse_route_decisions_total');
    started.child.kill('SIGTERM');
    const run = await started.finished;
    expect([run.status, run.signal]).toEqual([0, null]);
    expect(run.stdout).toContain('  SIGTERM: the hold ends\n');
    expect(lastLine(run.stdout)).toMatch(/^kvreuse demo: pulled 42 blocks .* 2 processes drained, 112 banks returned/);
    expect(rankProcessesIn(tmp)).toEqual([]);
    expect(readdirSync(tmp)).toEqual([]);
  }, 120_000);

  it('--hold without a metrics port is a usage error naming the flag: one line, exit 2', async () => {
    const run = await runBinary(['demo', '--hold'], { cwd: anywhere });
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      'kvreuse: demo: --hold keeps the demo serving its metrics: give --endpoint-metrics-port <port> (see kvreuse demo --help) [USAGE]',
    ]);
  });

  it('with --discovery-backend etcd, the ranks and the router meet in etcd', async () => {
    const etcd = await startEtcd();
    try {
      const run = await runBinary(
        [
          'demo',
          '--json',
          '--log',
          'requests.log',
          '--log-format',
          'json',
          '--no-router-enable-decode-to-prefill-reuse',
          '--discovery-backend',
          'etcd',
          '--discovery-etcd-endpoints',
          etcd.url,
        ],
        { cwd: anywhere },
      );
      expect(run.status).toBe(0);
      // --log: the request log goes to the file, relative to the working directory; stderr holds the progress.
      expect(run.stderrLines.filter((line) => line.startsWith('{') || line.startsWith('request'))).toEqual([]);
      const logged = readFileSync(join(anywhere, 'requests.log'), 'utf8')
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as { request: string });
      expect(logged.map((record) => record.request)).toEqual(['turn 2', 'short request']);
      expect(run.stderr).toContain(`(ucx, etcd discovery at ${etcd.url})\n`);
      const summary = JSON.parse(run.stdout) as DemoSummary;
      expect(summary.handOff).toMatchObject({ blocks: 40, bytes: 40 * 7_340_032 });
      expect(summary.drain.map((row) => [row.process, row.exitCode, row.banksReturned, row.banksRetained])).toEqual([
        ['qwen3-0.6b-decode-0/tp0', 0, 56, 0],
        ['qwen3-0.6b-decode-0/tp1', 0, 56, 0],
        ['qwen3-0.6b-prefill-0/tp0', 0, 56, 0],
      ]);
    } finally {
      await etcd.stop();
    }
  }, 120_000);

  it('with --discovery-backend etcd and no endpoints, it starts a local etcd for the run, runs on it (--transport-backend loopback), then stops it and removes its data', async () => {
    const tmp = runTmpdir();
    const run = await runBinary(
      [
        'demo',
        '--transport-backend',
        'loopback',
        '-o',
        'yaml',
        '--log',
        'local-etcd.log',
        '--no-router-enable-decode-to-prefill-reuse',
        '--discovery-backend',
        'etcd',
      ],
      { cwd: anywhere, env: { TMPDIR: tmp } },
    );
    expect(run.status).toBe(0);
    // -o yaml: stdout is the summary document; the progress is on stderr.
    const [, url, dataDir] = run.stderrLines[0]?.match(localEtcdLine) ?? [];
    expect(url).toBeDefined();
    expect(dataDir?.startsWith(`${tmp}/`)).toBe(true);
    expect(run.stderr).toContain(`(loopback, etcd discovery at ${url})\n`);
    const summary = parse(run.stdout) as DemoSummary;
    expect(summary).toMatchObject({ pull: null, killedRank: null, handOff: { blocks: 40, bytes: 40 * 7_340_032 } });
    expect(summary.decisions.map(({ request, action, reason }) => [request, action, reason])).toEqual([
      ['turn 2', 'recompute', 'disabled'],
      ['short request', 'recompute', 'disabled'],
    ]);
    expect(summary.drain.map((row) => [row.process, row.exitCode, row.banksReturned, row.banksRetained])).toEqual([
      ['qwen3-0.6b-decode-0/tp0', 0, 56, 0],
      ['qwen3-0.6b-decode-0/tp1', 0, 56, 0],
      ['qwen3-0.6b-prefill-0/tp0', 0, 56, 0],
    ]);
    // Nothing of the run is left: no etcd serving its data, and its temporary directory holds nothing.
    expect(etcdProcessesOf(dataDir!)).toEqual([]);
    expect(readdirSync(tmp)).toEqual([]);
  }, 60_000);

  it.each(['SIGINT', 'SIGTERM'] as const)(
    'interrupted (%s) while it runs on its local etcd, it stops the etcd and removes its data, then ends by the signal',
    async (signal) => {
      const tmp = runTmpdir();
      const started = startBinary(
        ['demo', '--backend', 'loopback', '--no-router-enable-decode-to-prefill-reuse', '--discovery-backend', 'etcd'],
        { cwd: anywhere, env: { TMPDIR: tmp } },
      );
      const [, , dataDir] = await started.stdoutLine(localEtcdLine);
      expect(etcdProcessesOf(dataDir!)).toHaveLength(1);
      started.child.kill(signal);
      const run = await started.finished;
      expect([run.status, run.signal]).toEqual([null, signal]);
      expect(etcdProcessesOf(dataDir!)).toEqual([]);
      expect(existsSync(dataDir!)).toBe(false);
    },
    60_000,
  );

  /** The demo on UCX with a TMPDIR of its own, once its three rank processes run. */
  async function demoWithRanksRunning() {
    const tmp = runTmpdir();
    const started = startBinary(['demo'], { cwd: anywhere, env: { TMPDIR: tmp } });
    await started.stdoutLine(/^turn 1: /);
    expect(rankProcessesIn(tmp)).toHaveLength(3);
    // The run's files, the cluster secret among them, are in a folder of its own that only its user can open.
    const runDirs = readdirSync(tmp).filter((name) => name.startsWith('kvreuse-demo-'));
    expect(runDirs).toHaveLength(1);
    expect(statSync(join(tmp, runDirs[0]!)).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(tmp, runDirs[0]!))).toContain('discovery.sqlite.secret');
    return { tmp, started };
  }

  it.each(['SIGINT', 'SIGTERM'] as const)(
    'interrupted (%s) while its rank processes run, it drains them and removes its files, then ends by the signal',
    async (signal) => {
      const { tmp, started } = await demoWithRanksRunning();
      started.child.kill(signal);
      const run = await started.finished;
      expect([run.status, run.signal]).toEqual([null, signal]);
      expect(rankProcessesIn(tmp)).toEqual([]);
      expect(readdirSync(tmp)).toEqual([]);
    },
    60_000,
  );

  it("its stdout's reader gone (| head) while its rank processes run: it drains them, removes its files and ends quietly with status 141", async () => {
    const { tmp, started } = await demoWithRanksRunning();
    // The next progress line the demo writes meets a pipe nobody reads (EPIPE).
    started.child.stdout?.destroy();
    const run = await started.finished;
    expect([run.status, run.signal]).toEqual([141, null]);
    expect(run.stderr).toBe('');
    expect(rankProcessesIn(tmp)).toEqual([]);
    expect(readdirSync(tmp)).toEqual([]);
  }, 60_000);

  it('killed (SIGKILL), the demo leaves no rank process behind: each drains once its parent is gone', async () => {
    const { tmp, started } = await demoWithRanksRunning();
    started.child.kill('SIGKILL');
    await started.finished;
    await vi.waitFor(() => expect(rankProcessesIn(tmp)).toEqual([]), { timeout: 30_000, interval: 100 });
  }, 60_000);

  it('with --discovery-backend etcd, no endpoints and no etcd on PATH: one line naming what is missing and how to install it, exit 1, nothing left', async () => {
    const tmp = runTmpdir();
    const run = await runBinary(['demo', '--backend', 'loopback', '--discovery-backend', 'etcd'], {
      cwd: anywhere,
      env: { PATH: tmp, TMPDIR: tmp },
    });
    expect(run).toMatchObject({ status: 1, stdout: '' });
    expect(run.stderrLines).toEqual([
      'kvreuse: demo needs etcd to start a local one for discovery.backend = etcd without discovery.etcd_endpoints: no etcd executable on PATH; ' +
        'install it with sudo apt-get install -y etcd-server, or name a running etcd with --discovery-etcd-endpoints <urls> [ETCD_UNAVAILABLE]',
    ]);
    expect(readdirSync(tmp)).toEqual([]);
  });

  it('a rank that fails (its metrics port in use): exit 1 naming it, every other process stopped, nothing left in the temporary folder', async () => {
    const tmp = runTmpdir();
    const port = await reservePorts(4);
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(port + 1, '127.0.0.1', resolve));
    try {
      const run = await runBinary(['demo', '--endpoint-metrics-port', String(port)], {
        cwd: anywhere,
        env: { TMPDIR: tmp },
      });
      expect(run.status).toBe(1);
      expect(run.stderrLines.at(-1)).toMatch(
        new RegExp(
          `^kvreuse: demo process qwen3-0\\.6b-decode-0/tp1 failed .*127\\.0\\.0\\.1:${port + 1}: the port is in use .*\\[DEMO_PROCESS_FAILED\\]$`,
        ),
      );
      expect(rankProcessesIn(tmp)).toEqual([]);
      expect(readdirSync(tmp)).toEqual([]);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  }, 60_000);

  it('a metrics port that leaves no port for the last demo processes is a usage error naming the setting: one line, exit 2', async () => {
    const run = await runBinary(['demo', '--endpoint-metrics-port', '65534'], { cwd: anywhere });
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      'kvreuse: demo: endpoint.metrics_port = 65534 leaves no port for some of the 4 demo processes (each serves its metrics on the next port); at most 65532 (see kvreuse demo --help) [USAGE]',
    ]);
  });

  it('memory discovery, which holds one process only, is a usage error: one line, exit 2', async () => {
    const run = await runBinary(['demo', '--discovery-backend', 'memory'], { cwd: anywhere });
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      'kvreuse: demo: discovery.backend = memory holds one process only; use sqlite (a fresh file per run) or etcd (a local one per run, or --discovery-etcd-endpoints) (see kvreuse demo --help) [USAGE]',
    ]);
  });

  it('an unknown setting flag is refused before anything starts: one line, exit 2', async () => {
    const run = await runBinary(['demo', '--router-nope', '1'], { cwd: anywhere });
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      expect.stringMatching(/^kvreuse: 1 unknown setting name\(s\): --router-nope in argv .*\[UNKNOWN_SETTING\]$/),
    ]);
  });

  it('--backend and --transport-backend both: a usage error naming both, exit 2', async () => {
    const run = await runBinary(['demo', '--backend', 'ucx', '--transport-backend', 'loopback'], { cwd: anywhere });
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      "kvreuse: demo: --backend ucx and --transport-backend loopback both set the ranks' transport; give one (see kvreuse demo --help) [USAGE]",
    ]);
  });

  it('a backend it does not know is a usage error: one line, exit 2', async () => {
    const run = await runBinary(['demo', '--backend', 'rdma'], { cwd: anywhere });
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      'kvreuse: demo: --backend must be one of ucx, loopback; got "rdma" (see kvreuse demo --help) [USAGE]',
    ]);
  });
});
