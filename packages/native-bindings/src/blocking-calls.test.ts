import { describe, expect, it } from 'vitest';
import { agentName, transport } from '../test/support/backends.js';
import { monitorBlockingCalls } from './blocking-calls.js';
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
    expect(seen).toBeGreaterThanOrEqual(3); // create, wake fd, shutdown, shutdown status, destroy
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
});
