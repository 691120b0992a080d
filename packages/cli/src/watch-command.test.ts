import { TestEngine } from '@kvreuse-internal/test-engine';
import { EngineEventSubscriber, EngineInventoryFeed } from '@kvreuse/engine-events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runCli } from './run.js';

const engines: TestEngine[] = [];
afterEach(() => {
  for (const engine of engines.splice(0)) engine.close();
});

/** The command's output, and `printed(text)`: resolves once stdout holds that text. */
function capture() {
  const out = { stdout: '', stderr: '' };
  const waiting: (() => boolean)[] = [];
  const printed = (text: string): Promise<void> =>
    new Promise((resolve) => {
      const check = (): boolean => out.stdout.includes(text) && (resolve(), true);
      if (!check()) waiting.push(check);
    });
  const stdout = (text: string): void => {
    out.stdout += text;
    waiting.splice(0, waiting.length, ...waiting.filter((check) => !check()));
  };
  return { out, printed, context: { stdout, stderr: (text: string) => (out.stderr += text), env: {}, cwd: '/' } };
}

const tokens = (first: number, blocks: number): number[] => Array.from({ length: blocks * 4 }, (_, i) => first + i);

/**
 * `watch --ranks 2 --batches 1` of two test engines, rank 1's on rank 0's inproc name with `_dp1`: rank 0's
 * feed breaks at its first batch (it stops following, and only it), then rank 1 stores 2 blocks.
 */
async function watchTwoRanksOneStopping(extraArgs: string[]) {
  // A name of its own per test: ZMQ releases an inproc name only once the closed socket's close has run on
  // its I/O thread, after the previous test ended.
  const endpoint = `inproc://watch-two-${extraArgs.join('') || 'table'}`;
  const ranks = [
    await TestEngine.open({ blockSize: 4, endpoint }),
    await TestEngine.open({ blockSize: 4, endpoint: `${endpoint}_dp1`, rank: 1 }),
  ] as const;
  engines.push(...ranks);
  const original = EngineInventoryFeed.prototype.apply;
  const apply = vi.spyOn(EngineInventoryFeed.prototype, 'apply').mockImplementation(function (
    this: EngineInventoryFeed,
    workerId,
    batch,
  ) {
    if (workerId === 'vllm/dp0') throw new Error('the feed broke');
    return original.call(this, workerId, batch);
  });
  try {
    const { out, printed, context } = capture();
    const args = ['watch', '--vllm', endpoint, '--ranks', '2', '--block-size', '4', '--batches', '1'];
    const watching = runCli([...args, ...extraArgs], context);
    await Promise.all(ranks.map((rank) => rank.waitForSubscribers()));
    await ranks[0].store(tokens(10, 1));
    await printed('the feed broke');
    await ranks[1].store(tokens(10, 2));
    return { status: await watching, out };
  } finally {
    apply.mockRestore();
  }
}

describe('kvreuse watch', () => {
  it('shows the blocks each rank holds, a repaired gap, a restart and the holders of a prompt', async () => {
    const engine = await TestEngine.open({ blockSize: 4, encoding: 'array', hashForm: 'uint64' });
    engines.push(engine);
    const { out, printed, context } = capture();
    const prompt = tokens(10, 3).join(',');
    const watching = runCli(
      [
        'watch',
        '--vllm',
        engine.endpoint,
        '--replay',
        engine.replayEndpoint,
        '--block-size',
        '4',
        '--prompt',
        prompt,
        '--batches',
        '3',
      ],
      context,
    );
    await engine.waitForSubscribers();
    engine.dropNext();
    await engine.store(tokens(10, 2));
    await engine.store(tokens(10, 3), 'CPU');
    // The publisher restarts once the replay is over (restarting during it is a case of its own).
    await printed('vllm/dp0 #1:');
    engine.restart();
    await engine.store(tokens(10, 1));
    expect(await watching).toBe(0);
    expect(out.stderr).toBe('');
    expect(out.stdout.split('\n')).toEqual([
      'vllm/dp0: gap, sequence 0 to 0 missed',
      expect.stringMatching(
        /^vllm\/dp0 #0 \(replayed\): \+2 −0 blocks → held gpu 2, host 0 \| gaps 1 \(0 unrepaired\), replays 1, restarts 0, malformed 0 \| lag \d+ ms$/,
      ),
      '  prompt (3 blocks): vllm/dp0 holds 2 (gpu 2, host 0) (advisory)',
      'vllm/dp0: replayed 1 batches of 0…0, 0 not repaired',
      expect.stringMatching(
        /^vllm\/dp0 #1: \+1 −0 blocks → held gpu 2, host 1 \| gaps 1 \(0 unrepaired\), replays 1, restarts 0/,
      ),
      '  prompt (3 blocks): vllm/dp0 holds 3 (gpu 2, host 1) (advisory)',
      'vllm/dp0: publisher restarted (sequence back to 0): its inventory starts afresh as vllm/dp0#1',
      expect.stringMatching(
        /^vllm\/dp0 #0: \+1 −0 blocks → held gpu 1, host 0 \| gaps 1 \(0 unrepaired\), replays 1, restarts 1/,
      ),
      '  prompt (3 blocks): vllm/dp0 holds 1 (gpu 1, host 0) (advisory)',
      '',
    ]);
  });

  it('refuses a command line it cannot follow', async () => {
    const { out, context } = capture();
    expect(await runCli(['watch', '--batches', '1'], context)).toBe(2);
    expect(out.stderr).toMatch(/--vllm <endpoint> is required/);
    expect(await runCli(['watch', '--vllm', 'tcp://127.0.0.1:1'], context)).toBe(2);
    expect(out.stderr).toMatch(/--batches <n> is needed/);
    expect(await runCli(['watch', '--vllm', 'tcp://127.0.0.1:1', '--batches', '1', '--prompt', 'a,b'], context)).toBe(
      2,
    );
    expect(out.stderr).toMatch(/--prompt is comma-separated token ids/);
  });

  it('refuses an endpoint it cannot follow, naming it, before it follows any rank', async () => {
    const refused = async (extra: string[]): Promise<string> => {
      const { out, context } = capture();
      expect(await runCli(['watch', '--batches', '1', ...extra], context)).toBe(2);
      return out.stderr;
    };
    expect(await refused(['--vllm', 'notanendpoint'])).toMatch(
      /^kvreuse: watch: --vllm is tcp:\/\/host:port, ipc:\/\/… or inproc:\/\/…, not "notanendpoint" .*\[USAGE\]\n$/,
    );
    expect(await refused(['--vllm', 'tcp://127.0.0.1:1', '--replay', 'bad', '--ranks', '2'])).toMatch(
      /^kvreuse: watch: --replay is tcp:\/\/host:port, ipc:\/\/… or inproc:\/\/…, not "bad" .*\[USAGE\]\n$/,
    );
    // Rank r listens on port + r: the last rank's port must exist.
    expect(await refused(['--vllm', 'tcp://127.0.0.1:65535', '--ranks', '2'])).toMatch(
      /^kvreuse: watch: --vllm tcp:\/\/127\.0\.0\.1:65535 leaves no port for rank 1 .*\[USAGE\]\n$/,
    );
    expect(await refused(['--vllm', 'tcp://127.0.0.1:0'])).toMatch(
      /^kvreuse: watch: --vllm tcp:\/\/127\.0\.0\.1:0 leaves no port for rank 0 .*\[USAGE\]\n$/,
    );
    expect(await refused(['--vllm', 'tcp://127.0.0.1:1', '--replay', 'tcp://127.0.0.1:65535', '--ranks', '2'])).toMatch(
      /^kvreuse: watch: --replay tcp:\/\/127\.0\.0\.1:65535 leaves no port for rank 1 \(rank r follows port \+ r, from 1 to 65535\) .*\[USAGE\]\n$/,
    );
  });

  it('refuses more ranks than engine-events follows, naming --ranks, before it follows any', async () => {
    const { out, context } = capture();
    // Port 65000 leaves ports for ranks 0 to 535: a count let through is refused for rank 536's port instead.
    const args = ['watch', '--vllm', 'tcp://127.0.0.1:65000', '--batches', '1', '--ranks'];
    expect(await runCli([...args, '1025'], context)).toBe(2);
    expect(out.stderr).toBe(
      'kvreuse: watch: --ranks is a whole number from 1 to 1024, not "1025" (see kvreuse watch --help) [USAGE]\n',
    );
    expect(await runCli([...args, '1024'], context)).toBe(2);
    expect(out.stderr).toMatch(/--vllm tcp:\/\/127\.0\.0\.1:65000 leaves no port for rank 536 /);
  });

  it.each(['1,,2', '1,2,', ' '])('refuses --prompt %j: an empty token id is no token 0', async (ids) => {
    const { out, context } = capture();
    expect(await runCli(['watch', '--vllm', 'tcp://127.0.0.1:1', '--batches', '1', '--prompt', ids], context)).toBe(2);
    expect(out.stderr).toMatch(/--prompt is comma-separated token ids/);
  });

  it('refuses a --prompt shorter than one block, naming both counts, rather than reporting nobody holds it', async () => {
    const { out, context } = capture();
    const args = ['watch', '--vllm', 'tcp://127.0.0.1:1', '--batches', '1', '--block-size', '4', '--prompt', '1,2,3'];
    expect(await runCli(args, context)).toBe(2);
    expect(out.stderr).toBe(
      'kvreuse: watch: --prompt has 3 token ids, fewer than one block of 4 (--block-size): no rank can hold any of it (see kvreuse watch --help) [USAGE]\n',
    );
  });

  it('refuses --prompt "": the option needs a value', async () => {
    const { out, context } = capture();
    expect(await runCli(['watch', '--vllm', 'tcp://127.0.0.1:1', '--batches', '1', '--prompt', ''], context)).toBe(2);
    expect(out.stderr).toMatch(/^kvreuse: watch: --prompt needs a value, not an empty one: --prompt <ids>/);
  });

  it('closes the ranks it subscribed when a later rank cannot subscribe', async () => {
    // Rank 1's ipc path is rank 0's with `_dp1`: 3 bytes past what a unix socket address holds.
    const path = `/tmp/${'w'.repeat(108 - '/tmp/'.length - 4)}`;
    const closed = vi.spyOn(EngineEventSubscriber.prototype, 'close');
    try {
      const { out, context } = capture();
      expect(await runCli(['watch', '--vllm', `ipc://${path}`, '--ranks', '2', '--batches', '1'], context)).toBe(2);
      expect(out.stderr).toBe(
        `kvreuse: watch: --vllm: rank 1 follows ipc://${path}_dp1: ZMQ cannot connect to it: File name too long (ENAMETOOLONG) (see kvreuse watch --help) [USAGE]\n`,
      );
      expect(closed).toHaveBeenCalledOnce();
    } finally {
      closed.mockRestore();
    }
  });

  it('refuses a replay endpoint ZMQ cannot connect to, naming --replay and the rank, before it follows any rank', async () => {
    // 108 bytes: one more than a unix socket address holds.
    const replay = `ipc:///tmp/${'r'.repeat(103)}`;
    const closed = vi.spyOn(EngineEventSubscriber.prototype, 'close');
    try {
      const { out, context } = capture();
      const args = ['watch', '--vllm', 'inproc://watch-replay', '--replay', replay, '--batches', '1'];
      expect(await runCli(args, context)).toBe(2);
      expect(out.stderr).toBe(
        `kvreuse: watch: --replay: rank 0 follows ${replay}: ZMQ cannot connect to it: File name too long (ENAMETOOLONG) (see kvreuse watch --help) [USAGE]\n`,
      );
      expect(closed).not.toHaveBeenCalled();
    } finally {
      closed.mockRestore();
    }
  });

  it('ends with WATCH_STOPPED, naming each rank and why, once every rank it follows has stopped', async () => {
    const engine = await TestEngine.open({ blockSize: 4 });
    engines.push(engine);
    // A failure the subscriber cannot go on from: it stops, and reports a failed event.
    const apply = vi.spyOn(EngineInventoryFeed.prototype, 'apply').mockImplementation(() => {
      throw new Error('the feed broke');
    });
    try {
      const { out, context } = capture();
      const watching = runCli(['watch', '--vllm', engine.endpoint, '--block-size', '4', '--batches', '1'], context);
      await engine.waitForSubscribers();
      await engine.store(tokens(10, 1));
      expect(await watching).toBe(1);
      expect(out.stdout).toBe('vllm/dp0: stopped following: the feed broke\n');
      expect(out.stderr).toBe(
        'kvreuse: watch: every rank stopped following: vllm/dp0: the feed broke [WATCH_STOPPED]\n',
      );
    } finally {
      apply.mockRestore();
    }
  });

  it('goes on with the rank still followed once another rank stopped', async () => {
    const { status, out } = await watchTwoRanksOneStopping([]);
    expect(status).toBe(0);
    expect(out.stderr).toBe('');
    expect(out.stdout.split('\n')).toEqual([
      'vllm/dp0: stopped following: the feed broke',
      expect.stringMatching(/^vllm\/dp1 #0: \+2 −0 blocks → held gpu 2, host 0 \| gaps 0 /),
      '',
    ]);
  });

  it('names the rank of each line with -o json', async () => {
    const { status, out } = await watchTwoRanksOneStopping(['-o', 'json']);
    expect(status).toBe(0);
    expect(
      out.stdout
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as unknown),
    ).toEqual([
      { workerId: 'vllm/dp0', rank: 0, kind: 'failed', reason: 'the feed broke', held: { gpu: 0, host: 0 } },
      {
        workerId: 'vllm/dp1',
        rank: 1,
        kind: 'batch',
        seq: '0',
        replayed: false,
        outcome: { stored: 2, removed: 0, cleared: false, skipped: {}, ignored: false },
        held: { gpu: 2, host: 0 },
      },
    ]);
  });

  it('refuses an option it does not take, rather than following without it', async () => {
    const { out, context } = capture();
    const args = ['watch', '--vllm', 'tcp://127.0.0.1:1', '--batches', '1', '--bogus', 'x'];
    expect(await runCli(args, context)).toBe(2);
    expect(out.stderr).toBe('kvreuse: watch: unexpected argument "--bogus" (see kvreuse watch --help) [USAGE]\n');
  });
});
