// `kvreuse bench link` as a user runs it on two hosts, the hosts being two network namespaces: the
// installed binary listens in one and connects from the other, both held to UCX's tcp over the veth
// (on one machine UCX would otherwise take shared memory, which namespaces do not separate).
import { spawn } from 'node:child_process';
import type { VethPair } from '@kvreuse-internal/test-support';

export const benchLinkPort = 13_700;
export const benchLinkSizes = [4096, 65_536, 1 << 20];
export const benchLinkIterations = 50;

/** What a run printed and how it ended. */
export interface Ended {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The part of the peer's JSON document the test reads. */
export interface BenchLinkReport {
  readonly results: readonly { direction: string; bytes: number; iterations: number; bytesPerSecond: number }[];
}

interface Running {
  readonly kill: () => void;
  readonly ended: Promise<Ended>;
}

function runIn(launcher: readonly string[], binary: string, args: readonly string[]): Running {
  // `ip netns exec` and env exec what they run: the process is the binary's node, which a kill reaches.
  // A user's environment: no KVREUSE_* variable of the test run (the binary would warn about it).
  const env = {
    PATH: process.env.PATH ?? '',
    ...(process.env.TMPDIR === undefined ? {} : { TMPDIR: process.env.TMPDIR }),
  };
  const child = spawn(launcher[0]!, [...launcher.slice(1), binary, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const ended = new Promise<Ended>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (status, signal) =>
      resolve({ status, stdout, stderr: stderr + (signal === null ? '' : `(ended by ${signal})`) }),
    );
  });
  return { kill: () => child.kill('SIGTERM'), ended };
}

/**
 * Runs `binary bench link --listen` in the pair's namespace `a` and `--connect` from `b`, and waits for
 * both to end. The connecting side tries again while the listener is not up yet. On every exit path
 * the listener has ended before this returns: when the connecting side failed (or could not start),
 * the listener is interrupted, which undoes what it opened.
 */
export async function benchLinkAcross(pair: VethPair, binary: string): Promise<{ listened: Ended; measured: Ended }> {
  const settings = ['--transport-ucx-transports', 'tcp', '--transport-ucx-net-devices', pair.device];
  const listener = runIn(pair.a.launcher, binary, [
    ...['bench', 'link', '--listen', '--address', pair.a.address, '--port', String(benchLinkPort), '--timeout', '60'],
    ...settings,
  ]);
  let measured: Ended | undefined;
  try {
    measured = await runIn(pair.b.launcher, binary, [
      ...['bench', 'link', '--connect', `${pair.a.address}:${benchLinkPort}`, '--timeout', '60'],
      ...[
        '--sizes',
        benchLinkSizes.join(','),
        '--iterations',
        String(benchLinkIterations),
        '--warmup',
        '5',
        '-o',
        'json',
      ],
      ...settings,
    ]).ended;
  } finally {
    if (measured?.status !== 0) listener.kill();
  }
  return { listened: await listener.ended, measured };
}
