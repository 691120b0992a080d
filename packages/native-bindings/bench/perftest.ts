/** ucx_perftest runs, the anchor the benchmark's READs are compared with. */
import { type SpawnOptions, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

const UCX_PERFTEST_PORT = 13_000 + (process.pid % 2000);

/** The lanes UCX reports for its endpoints in `output` (written with UCX_LOG_LEVEL=info). */
function lanesIn(output: string): string {
  const lanes = output
    .split('\n')
    .map((line) => /ep_cfg\[\d+\]: (.*)$/.exec(line)?.[1]?.trim())
    .filter((lane): lane is string => lane !== undefined);
  return lanes.length === 0 ? 'not reported' : [...new Set(lanes)].join('; ');
}

/** Where the two ucx_perftest processes run, and with which settings. */
export interface PerftestPlacement {
  /** Command prefixes that run the server and the client (e.g. in a network namespace). */
  readonly serverLauncher: readonly string[];
  readonly clientLauncher: readonly string[];
  /** The server's address, as the client reaches it. */
  readonly serverAddress: string;
  readonly env: NodeJS.ProcessEnv;
}

const ON_THIS_HOST: PerftestPlacement = { serverLauncher: [], clientLauncher: [], serverAddress: '127.0.0.1', env: {} };

/** Spawns `command` behind `launcher` (nothing, or a command that runs it, such as `ip netns exec`). */
function spawnLaunched(launcher: readonly string[], command: string[], options: SpawnOptions) {
  const [program, ...args] = [...launcher, ...command] as [string, ...string[]];
  return spawn(program, args, options);
}

/**
 * Waits until the process `pid` listens on TCP `port`, read from its own view of the network
 * (/proc/<pid>/net, so inside its namespace too): ucx_perftest's server is ready in about 20 ms.
 */
async function listening(pid: number | undefined, port: number): Promise<void> {
  const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const deadline = Date.now() + 10_000;
  const listensIn = (table: string) =>
    table.split('\n').some((line) => {
      // Columns: sl, local address, remote address, state (0A: LISTEN).
      const [, , address, , state] = line.split(/\s+/);
      return address?.endsWith(local) === true && state === '0A';
    });
  for (;;) {
    if (pid === undefined || !existsSync(`/proc/${pid}`)) {
      throw new Error(
        `ucx_perftest's server (pid ${pid ?? 'none: it did not start'}) exited before it listened on port ${port}`,
      );
    }
    for (const table of ['tcp', 'tcp6']) {
      try {
        if (listensIn(readFileSync(`/proc/${pid}/net/${table}`, 'utf8'))) return;
      } catch {
        // this kernel has no such table (tcp6 without IPv6), or the server just exited: checked above
      }
    }
    if (Date.now() > deadline)
      throw new Error(`ucx_perftest's server (pid ${pid}) did not listen on port ${port} within 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * ucx_perftest -t ucp_get between a server and a client process, `outstanding` gets in flight
 * (ucx_perftest's -O; its default, 0, waits for each get before the next). `beside`, the run of the
 * measured side it is paired with, runs once the server listens, just before the client: the two runs
 * are then next to each other in time (pairedRatio).
 */
export async function ucxPerftest<T = undefined>(
  size: number,
  iterations: number,
  {
    placement = ON_THIS_HOST,
    outstanding = 0,
    beside,
  }: { placement?: PerftestPlacement; outstanding?: number; beside?: () => Promise<T> } = {},
): Promise<{ bytesPerSecond: number; lanes: string; beside: T | undefined }> {
  const port = UCX_PERFTEST_PORT;
  const env = { ...process.env, ...placement.env };
  const server = spawnLaunched(placement.serverLauncher, ['ucx_perftest', '-p', String(port)], {
    stdio: 'ignore',
    env,
  });
  const serverExited = new Promise((resolve) => {
    server.on('exit', resolve);
    server.on('error', resolve); // not started: the client's run fails and says why
  });
  try {
    await listening(server.pid, port);
    const besideResult = await beside?.();
    const client = spawnLaunched(
      placement.clientLauncher,
      [
        'ucx_perftest',
        placement.serverAddress,
        ...['-p', String(port), '-t', 'ucp_get', '-s', String(size), '-n', String(iterations), '-w', '100'],
        ...(outstanding > 0 ? ['-O', String(outstanding)] : []),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...env, UCX_LOG_LEVEL: 'info' } },
    );
    let output = '';
    const collect = (chunk: string) => {
      output += chunk;
    };
    client.stdout?.setEncoding('utf8').on('data', collect);
    client.stderr?.setEncoding('utf8').on('data', collect);
    const code = await new Promise<number | null>((resolve) => client.on('exit', resolve));
    const final = output.split('\n').find((line) => line.trim().startsWith('Final:'));
    if (code !== 0 || final === undefined) throw new Error(`ucx_perftest exited with ${code}:\n${output}`);
    // Final: iterations, latency 50%/avg/overall (usec), bandwidth avg/overall (MB/s, MB = 2^20), rate avg/overall
    const columns = final.trim().split(/\s+/);
    const mebibytesPerSecond = Number(columns[6]);
    return { bytesPerSecond: mebibytesPerSecond * 2 ** 20, lanes: lanesIn(output), beside: besideResult };
  } finally {
    server.kill();
    await serverExited; // its exit (unmapping its segments) would otherwise overlap the next measured run
  }
}
