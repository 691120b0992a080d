// `kvreuse bench link` as a user runs it on one machine: a listener and a peer, two processes of the
// built binary, over UCX's tcp transport on the loopback interface. What it measures is not checked
// (no test times anything); what it prints is. Between two network namespaces, from the installed
// package, it runs in tools/pack-install.
import { describe, expect, it } from 'vitest';
import { type BinaryRun, runBinary, startBinary } from './binary.js';
import { reservePorts } from '@kvreuse-internal/test-support';

const overLoopback = ['--transport-ucx-transports', 'tcp', '--transport-ucx-net-devices', 'lo'];

/** A listener on a free port of 127.0.0.1 and a peer run with `peerArgs`, both to their end. */
async function linkOnLoopback(
  peerArgs: readonly string[],
): Promise<{ port: number; listened: BinaryRun; peer: BinaryRun }> {
  const port = await reservePorts(1);
  const listener = startBinary([
    'bench',
    'link',
    '--listen',
    '--address',
    '127.0.0.1',
    '--port',
    String(port),
    ...overLoopback,
  ]);
  const peer = await runBinary(['bench', 'link', '--connect', `127.0.0.1:${port}`, ...peerArgs, ...overLoopback]);
  return { port, listened: await listener.finished, peer };
}

describe('kvreuse bench link on one machine', () => {
  it('the peer prints one document: each size and direction, as asked; the listener says who came and exits', async () => {
    const { port, listened, peer } = await linkOnLoopback([
      '--sizes',
      '4k,64k',
      '--iterations',
      '20',
      '--warmup',
      '2',
      '--in-flight',
      '2',
      '-o',
      'json',
    ]);
    expect(peer).toMatchObject({ status: 0, stderr: '' });
    const report = JSON.parse(peer.stdout) as Record<string, unknown> & { results: Record<string, unknown>[] };
    expect(report).toMatchObject({
      peer: `127.0.0.1:${port}`,
      lanes: ['tcp/lo.0'],
      warmup: 2,
      inFlight: 2,
      verified: true,
    });
    expect(report.results.map(({ direction, bytes, iterations }) => [direction, bytes, iterations])).toEqual([
      ['read', 4096, 20],
      ['read', 65_536, 20],
      ['write', 4096, 20],
      ['write', 65_536, 20],
    ]);
    for (const row of report.results)
      for (const figure of ['latencyMedianUs', 'latencyAverageUs', 'bytesPerSecond', 'messagesPerSecond'])
        expect(row[figure]).toBeGreaterThan(0);

    expect(listened).toMatchObject({ status: 0, stdout: '' });
    expect(listened.stderrLines).toEqual([
      `kvreuse bench link: listening on 127.0.0.1:${port}; on the other host run: kvreuse bench link --connect <this host>:${port}`,
      expect.stringMatching(
        /^kvreuse bench link: 127\.0\.0\.1:\d+ connected; it reads and writes 65536 bytes of this side's memory$/,
      ),
      expect.stringMatching(/^kvreuse bench link: 127\.0\.0\.1:\d+ is done$/),
    ]);
  }, 60_000);

  it('the table names its units', async () => {
    const { port, listened, peer } = await linkOnLoopback([
      '--sizes',
      '1m',
      '--iterations',
      '3',
      '--warmup',
      '0',
      '--directions',
      'write',
    ]);
    expect(listened.status).toBe(0);
    const lines = peer.stdout.split('\n');
    expect(lines[0]).toBe(
      `kvreuse bench link to 127.0.0.1:${port}: lanes tcp/lo.0; 1 in flight, 0 warm-up messages per row`,
    );
    expect(lines[1]).toMatch(
      /^direction +size +bytes +iterations +latency median \(µs\) +latency avg \(µs\) +bandwidth \(GB\/s\) +message rate \(msg\/s\)$/,
    );
    expect(lines[2]).toMatch(/^write +1 MiB +1048576 +3 +[\d.]+ +[\d.]+ +[\d.]+ +\d+$/);
    expect(lines.slice(3)).toEqual([
      'GB/s is 10^9 bytes per second; latency is each message from its post to its completion.',
      '',
    ]);
  }, 60_000);

  it('nobody listening: one line naming the peer, exit 1', async () => {
    const port = await reservePorts(1);
    const run = await runBinary(['bench', 'link', '--connect', `127.0.0.1:${port}`, '--timeout', '1']);
    expect(run).toMatchObject({ status: 1, stdout: '' });
    expect(run.stderrLines).toEqual([
      expect.stringMatching(
        new RegExp(`^kvreuse: the peer 127\\.0\\.0\\.1:${port} cannot be reached: .* \\[PEER_UNREACHABLE\\]$`),
      ),
    ]);
  }, 30_000);

  it('a size it cannot take: one line naming it, exit 2, nothing started', async () => {
    const run = await runBinary(['bench', 'link', '--connect', '127.0.0.1:1', '--sizes', '4k,2g']);
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([
      'kvreuse: bench link: --sizes: "2g" is not a message size from 1 byte to 1g (bytes, or a number with k, m or g) (see kvreuse bench link --help) [USAGE]',
    ]);
  });
});
