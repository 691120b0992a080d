import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { PerformanceObserver } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { agentName, transport } from '../test/support/backends.js';
import { describeBlockingCall, monitorBlockingCalls, registerApi } from './blocking-calls.js';
import { openLibrary } from './library.js';

describe('monitorBlockingCalls', () => {
  it('records the longest synchronous native call and its name while it runs, and nothing after stop', async () => {
    const library = openLibrary(transport.libraryPath);
    const unmonitored = library.api.kvt_agent_poll;
    const monitor = monitorBlockingCalls();
    expect(monitor.isRunning).toBe(true);
    expect(library.api.kvt_agent_poll).not.toBe(unmonitored);
    const agent = await transport.createAgent({ name: agentName('monitored'), backend: 'loopback' });
    await agent.close();
    monitor.stop();
    const seen = monitor.calls;
    // Each made at least once. How often the two statuses are asked, and whether a wake-up polls the open agent,
    // depends on whether its thread finished its start and its shutdown before the JavaScript thread looked.
    const madeByEveryCreateAndClose = [
      'kvt_agent_create_begin',
      'kvt_agent_wake_fd',
      'kvt_agent_start_status',
      'kvt_agent_shutdown',
      'kvt_agent_shutdown_status',
      'kvt_agent_destroy',
    ];
    expect(monitor.slowest(Number.POSITIVE_INFINITY).map(({ call }) => call)).toEqual(
      expect.arrayContaining(madeByEveryCreateAndClose),
    );
    expect(seen).toBeGreaterThanOrEqual(madeByEveryCreateAndClose.length);
    expect(monitor.longest).toMatchObject({ call: expect.stringMatching(/^kvt_agent_/), ms: expect.any(Number) });
    // Stopped, the facade calls the bound functions directly again: monitoring costs nothing when off.
    expect(library.api.kvt_agent_poll).toBe(unmonitored);
    expect(monitor.isRunning).toBe(false);
    transport.counters();
    expect(monitor.calls).toBe(seen);
  });

  it('lets two monitors run at once, each seeing the calls of its own span', () => {
    const outer = monitorBlockingCalls();
    transport.counters();
    const inner = monitorBlockingCalls();
    transport.counters();
    inner.stop();
    transport.counters();
    outer.stop();
    expect([outer.calls, inner.calls]).toEqual([3, 1]);
    expect(inner.longest?.call).toBe('kvt_counters');
    expect(inner.slowest(3)).toEqual([inner.longest]);
  });

  it('reads the CPU time and context switches of calls longer than cpuTimeAboveMs only, so a waiting call shows as one', () => {
    openLibrary(transport.libraryPath); // binds kvt_thread_usage, the monitor's CPU clock and switch counts
    const cell = new Int32Array(new SharedArrayBuffer(4));
    // A stand-in for a native call whose thread waits: 30 ms of wall-clock time, no CPU time to speak of.
    const waiting = () => Atomics.wait(cell, 0, 0, 30);
    const api: Record<string, unknown> = { kvt_waits: waiting };
    registerApi(api, { kvt_waits: waiting });
    const everyCall = monitorBlockingCalls({ cpuTimeAboveMs: 0 });
    const longCalls = monitorBlockingCalls();
    const noCalls = monitorBlockingCalls({ cpuTimeAboveMs: Number.POSITIVE_INFINITY });
    transport.counters();
    (api.kvt_waits as () => void)();
    for (const monitor of [everyCall, longCalls, noCalls]) monitor.stop();

    const waited = longCalls.longest;
    expect(waited).toMatchObject({ call: 'kvt_waits', cpuMs: expect.any(Number) });
    expect(waited?.cpuMs).toBeLessThan(waited?.ms ?? 0);
    // Atomics.wait sleeps in the kernel: the thread blocked (a voluntary switch), it was not only preempted,
    // and the sleep counts as holding the thread.
    expect(waited?.blocked).toBeGreaterThanOrEqual(1);
    expect(waited?.heldMs).toBe(Math.max(0, (waited?.ms ?? 0) - (waited?.waitedMs ?? 0)));
    expect(waited?.heldMs).toBeGreaterThan(waited?.cpuMs ?? 0);
    expect(waited?.preempted).toEqual(expect.any(Number));
    expect(everyCall.slowest(2).map((call) => [call.call, call.cpuMs !== undefined])).toEqual([
      ['kvt_waits', true],
      ['kvt_counters', true],
    ]);
    expect(noCalls.slowest(2).map((call) => [call.cpuMs, call.blocked, call.preempted])).toEqual([
      [undefined, undefined, undefined],
      [undefined, undefined, undefined],
    ]);
    expect(describeBlockingCall({ call: 'kvt_x', ms: 7.1, cpuMs: 0.4 })).toBe('kvt_x 7.10 ms wall, 0.40 ms cpu');
    expect(describeBlockingCall({ call: 'kvt_x', ms: 7.1, cpuMs: 0.4, preempted: 2, blocked: 0 })).toBe(
      'kvt_x 7.10 ms wall, 0.40 ms cpu, preempted 2×, blocked 0×',
    );
    expect(describeBlockingCall({ call: 'kvt_x', ms: 0.5 })).toBe('kvt_x 0.50 ms wall');
  });

  it('tells the time a call waited for a core from the time it held the thread', async () => {
    openLibrary(transport.libraryPath); // binds kvt_thread_usage
    // This thread's run-queue delay so far (ns), as the kernel reports it.
    const waitedNs = () => Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[1]);
    const allowed = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '';
    const cpu = allowed.split(/[,-]/)[0] ?? '0';
    // This (main) thread and a spinning process share one CPU: the stand-in call below spins until the
    // kernel has made it wait for the core, which fairness forces.
    const spinner = spawn('taskset', ['-c', cpu, process.execPath, '-e', 'for (;;) {}'], { stdio: 'ignore' });
    const pin = (cpus: string) => {
      const pinned = spawnSync('taskset', ['-p', '-c', cpus, String(process.pid)], { encoding: 'utf8' });
      expect(pinned.status, pinned.stderr).toBe(0);
    };
    const spinsUntilItWaited = () => {
      const start = waitedNs();
      const deadline = Date.now() + 30_000;
      while (waitedNs() === start && Date.now() < deadline);
    };
    const api: Record<string, unknown> = { kvt_spins: spinsUntilItWaited };
    registerApi(api, { kvt_spins: spinsUntilItWaited });
    const monitor = monitorBlockingCalls({ cpuTimeAboveMs: 0 });
    pin(cpu);
    try {
      (api.kvt_spins as () => void)();
    } finally {
      pin(allowed);
      spinner.kill();
      monitor.stop();
    }
    const spun = monitor.slowest(5).find(({ call }) => call === 'kvt_spins');
    expect(spun?.waitedMs).toBeGreaterThan(0);
    // It never slept: it held the thread for its CPU time, not for the time the spinner had the core.
    expect(spun?.blocked).toBe(0);
    expect(spun?.heldMs).toBe(Math.min(spun?.ms ?? 0, spun?.cpuMs ?? 0));
    expect(monitor.longestHeld?.heldMs).toBe(Math.max(...monitor.slowest(5).map((call) => call.heldMs)));
    expect(describeBlockingCall({ call: 'kvt_x', ms: 7.1, cpuMs: 0.1, preempted: 1, blocked: 0, waitedMs: 6.5 })).toBe(
      'kvt_x 7.10 ms wall, 0.10 ms cpu, preempted 1×, blocked 0×, waited 6.50 ms for a core',
    );
  });

  it('adds to a long call the garbage collections Node reports during it', async () => {
    setFlagsFromString('--expose-gc');
    const collectGarbage = runInNewContext('gc') as () => void;
    // Stand-ins for native calls: one during which V8 collects garbage, one during which it does not.
    const collecting = () => collectGarbage();
    const cell = new Int32Array(new SharedArrayBuffer(4));
    const waiting = () => Atomics.wait(cell, 0, 0, 5);
    const api: Record<string, unknown> = { kvt_collects: collecting, kvt_waits: waiting };
    registerApi(api, { kvt_collects: collecting, kvt_waits: waiting });
    const monitor = monitorBlockingCalls({ cpuTimeAboveMs: 0 });
    const reported = new Promise<void>((resolve) => {
      const observer = new PerformanceObserver(() => {
        observer.disconnect();
        resolve();
      });
      observer.observe({ type: 'gc' });
    });
    (api.kvt_collects as () => void)();
    (api.kvt_waits as () => void)();
    await reported;
    monitor.stop();

    const [collected, waited] = ['kvt_collects', 'kvt_waits'].map((name) =>
      monitor.slowest(2).find(({ call }) => call === name),
    );
    expect(collected?.gcMs).toBeGreaterThan(0);
    expect(collected?.gcMs).toBeLessThanOrEqual(collected?.ms ?? 0);
    expect(waited).toBeDefined();
    expect(waited?.gcMs).toBeUndefined();
    expect(describeBlockingCall({ call: 'kvt_x', ms: 7.1, cpuMs: 6.9, gcMs: 6.25 })).toBe(
      'kvt_x 7.10 ms wall, 6.90 ms cpu, 6.25 ms gc',
    );
  });
});
