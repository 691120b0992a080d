import { createServer, type Server } from 'node:http';
import { ManualClock } from '../test/support/manual-clock.js';
import { nextTurn } from '../test/support/next-turn.js';
import { defaultSettings } from '../test/support/settings.js';
import { publishedKeys, storeWith } from '../test/support/discovery-stores.js';
import { type Geometry, layoutRankBanks, referenceGeometries } from '@kvreuse/descriptors';
import { type Agent, loadTransport } from '@kvreuse/native-bindings';
import { ClusterSecret, MemoryDiscoveryStore } from '@kvreuse/discovery';
import { Bank, kvreuseOwner, type WorkerIdentity } from '@kvreuse/registry';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BlockPool } from './block-pool.js';
import { deferred } from './deferred.js';
import { EndpointOptionError, MetricsPortError } from './errors.js';
import { EndpointNotReadyError, EndpointStateError } from './lifecycle.js';
import type { EndpointState, EndpointTransition } from './lifecycle.js';
import { EndpointMetrics } from './metrics.js';
import type { ReuseEndpointOptions } from './endpoint-options.js';
import { ReuseEndpoint } from './reuse-endpoint.js';
import { thisHost } from './this-host.js';

const transport = loadTransport();
const geometry = referenceGeometries['qwen3-0.6b'];
const settings = defaultSettings;
const secret = ClusterSecret.ofThisProcess();
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  expect(transport.counters()).toMatchObject({ liveRegistrations: 0, liveAllocations: 0, liveAgents: 0 });
});

const worker = (incarnation = 'inc-1'): WorkerIdentity => ({
  workerId: 'decode-0',
  incarnation,
  role: 'decode',
  geometry,
  tpSize: 2,
  ppSize: 1,
  dpRank: 0,
});

/** One rank as its process would set it up: its agent and its kvreuse-owned banks, not yet registered. */
async function rankEndpoint(
  store: MemoryDiscoveryStore,
  tpRank: number,
  extra: {
    metrics?: EndpointMetrics;
    incarnation?: string;
    metricsPort?: number;
    geometry?: Geometry;
    clock?: ManualClock;
  } = {},
): Promise<{
  endpoint: ReuseEndpoint;
  agent: Agent;
  transitions: EndpointTransition[];
  options: ReuseEndpointOptions;
}> {
  const identity = {
    ...worker(extra.incarnation),
    ...(extra.geometry === undefined ? {} : { geometry: extra.geometry }),
  };
  const agent = await transport.createAgent({
    name: `${identity.workerId}-${identity.incarnation}-tp${tpRank}-${process.pid}`,
    backend: 'loopback',
  });
  const layout = layoutRankBanks(geometry, { tpRank, tpSize: 2, ppRank: 0, ppSize: 1 }, { address: 0n, blocks: 2 });
  const banks = await Promise.all(
    layout.map(async (bank, index) => {
      const allocation = await agent.allocate(bank.bytes);
      return Bank.adopt({ ...bank, tpRank, ppRank: 0, index, address: allocation.address }, kvreuseOwner(allocation));
    }),
  );
  const rankSettings =
    extra.metricsPort === undefined
      ? settings
      : { ...settings, endpoint: { ...settings.endpoint, metricsPort: extra.metricsPort } };
  const options: ReuseEndpointOptions = {
    agent,
    discovery: store,
    secret,
    worker: identity,
    rank: { tpRank, ppRank: 0 },
    banks,
    settings: rankSettings,
    ...(extra.metrics === undefined ? {} : { metrics: extra.metrics }),
    ...(extra.clock === undefined ? {} : { clock: extra.clock }),
  };
  const endpoint = new ReuseEndpoint(options);
  const transitions: EndpointTransition[] = [];
  endpoint.onTransition((transition) => transitions.push(transition));
  cleanups.push(() => endpoint.close());
  return { endpoint, agent, transitions, options };
}

/** An HTTP server holding a port the system picked on 127.0.0.1, closed after the test. */
async function holdPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return { server, port: (server.address() as { port: number }).port };
}

function openStore(): MemoryDiscoveryStore {
  const store = new MemoryDiscoveryStore();
  cleanups.unshift(() => store.close());
  return store;
}

// The deadlines of the drains and closes below that run on the system clock are safety bounds: nothing they
// withdraw hangs and no operation is in flight, and what they assert does not depend on the deadline. A test
// whose outcome does runs its endpoint on a manual clock.

/** The transitions of an endpoint registered, then closed (its close draining first). */
const registeredThenClosed = ['registering', 'registered', 'draining', 'drained', 'closing', 'closed'];

describe('ReuseEndpoint', () => {
  it('a TP 2 worker: each rank registers and publishes; both are ready only once both are published; a drained rank makes the other not ready', async () => {
    const store = openStore();
    const metrics = new EndpointMetrics();
    const rank0 = await rankEndpoint(store, 0, { metrics });
    // Its clock never moves: its drain's withdrawal ends before its deadline passes, however slow the machine,
    // so rank 0 sees it leave at once rather than when its lease expires.
    const rank1 = await rankEndpoint(store, 1, { clock: new ManualClock() });

    await rank0.endpoint.register();
    expect(rank0.endpoint.registered?.banks).toHaveLength(56);
    await rank0.endpoint.publish();
    expect(rank0.endpoint.state).toBe('published');
    expect(rank0.endpoint.readiness).toMatchObject({ ready: false });

    await rank1.endpoint.register();
    await rank1.endpoint.publish();
    await vi.waitFor(() => expect(rank0.endpoint.state).toBe('ready'), { timeout: 20_000, interval: 5 });
    expect(rank1.endpoint.state).toBe('ready');
    // Each rank publishes `thisHost()` (the boot id and its namespaces), so routers see both ranks on this host.
    const readiness = rank0.endpoint.readiness;
    if (readiness?.ready !== true) throw new Error('unreachable: the worker is ready');
    const host = thisHost();
    expect(host).toMatch(/^[\da-f-]+\/ipc:\[\d+\]\/pid:\[\d+\]$/);
    expect(readiness.worker.ranks.map((part) => [part.version, part.host])).toEqual([
      [3, host],
      [3, host],
    ]);
    expect(await metrics.text()).toContain('kvreuse_endpoint_state{state="ready"} 1');

    const report = await rank1.endpoint.drain({ deadlineMs: 5_000 });
    expect(report.steps.find(({ step }) => step === 'withdraw-rank-parts')).toMatchObject({ outcome: 'ok' });
    expect(report.banksReturned).toHaveLength(56);
    expect(report.banksRetained).toEqual([]);
    expect(rank1.endpoint.state).toBe('drained');
    await vi.waitFor(() => expect(rank0.endpoint.state).toBe('published'), { timeout: 20_000, interval: 5 });
    expect(rank0.transitions.at(-1)?.reason).toMatch(/^worker not ready: missing ranks \(tp 1/);

    expect(rank1.transitions.map(({ to }) => to)).toEqual([
      'registering',
      'registered',
      'publishing',
      'published',
      'ready',
      'draining',
      'drained',
    ]);
    const closed = await rank1.endpoint.close();
    expect(closed.agentDestroyed).toBe(true);
    expect(rank1.endpoint.state).toBe('closed');
    // close() without drain() drains first, in the same order.
    const result = await rank0.endpoint.close();
    expect(result.report.banksReturned).toHaveLength(56);
    expect(rank0.transitions.slice(-4).map(({ to }) => to)).toEqual(['draining', 'drained', 'closing', 'closed']);
  });

  it('whenReady() resolves once the worker is ready, with the epoch, the registered rank and the readiness; readyRank refuses before', async () => {
    const store = openStore();
    const rank0 = await rankEndpoint(store, 0);
    const rank1 = await rankEndpoint(store, 1);
    let settled = false;
    const ready = rank0.endpoint.whenReady().finally(() => (settled = true));
    expect(() => rank0.endpoint.readyRank).toThrow(new EndpointStateError('readyRank', 'created', ['ready']));
    await rank0.endpoint.register();
    await rank0.endpoint.publish();
    expect(() => rank0.endpoint.readyRank).toThrow(
      'readyRank is not allowed while the endpoint is published (only while ready)',
    );
    await rank1.endpoint.register();
    // Rank 0 alone is not its worker: not ready until rank 1 is published too.
    expect(settled).toBe(false);
    await rank1.endpoint.publish();
    const { epoch, registered, readiness } = await ready;
    expect(epoch).toBe(rank0.endpoint.epoch);
    expect(registered).toBe(rank0.endpoint.registered);
    expect(readiness).toMatchObject({ ready: true, workerId: 'decode-0', incarnation: 'inc-1', epoch });
    expect(readiness.worker.ranks).toHaveLength(2);
    // Once ready, at once.
    expect((await rank0.endpoint.whenReady()).epoch).toBe(epoch);
    expect(rank0.endpoint.readyRank.epoch).toBe(epoch);
  });

  it('whenReady() rejects, with no warning, when a transition listener drains the endpoint as it turns ready', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const store = openStore();
      const rank0 = await rankEndpoint(store, 0);
      const rank1 = await rankEndpoint(store, 1);
      let drained: Promise<unknown> | undefined;
      rank0.endpoint.onTransition(({ to }) => {
        if (to === 'ready') drained = rank0.endpoint.drain({ deadlineMs: 5_000 });
      });
      const ready = rank0.endpoint.whenReady();
      for (const { endpoint } of [rank0, rank1]) await endpoint.register();
      for (const { endpoint } of [rank0, rank1]) await endpoint.publish();
      await expect(ready).rejects.toThrow(new EndpointNotReadyError('draining', 'drain({ deadlineMs: 5000 })'));
      await drained;
      expect(rank0.transitions.map(({ to }) => to).slice(-3)).toEqual(['ready', 'draining', 'drained']);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });

  it('whenReady() rejects with EndpointNotReadyError when the registration fails or the endpoint drains first, and at once once it drained', async () => {
    const store = openStore();
    const failing = await rankEndpoint(store, 0);
    failing.agent.faults.failNth('register', 3, 'NO_MEMORY');
    const failed = expect(failing.endpoint.whenReady()).rejects.toMatchObject({
      code: 'ENDPOINT_NOT_READY',
      state: 'created',
      reason: expect.stringMatching(/^registration failed: .*NO_MEMORY/),
    });
    await expect(failing.endpoint.register()).rejects.toThrow(/NO_MEMORY/);
    await failed;
    await failing.endpoint.register(); // so that close() hands its banks back

    // Rank 0 of a TP 2 worker whose rank 1 never comes: published, never ready, then drained.
    const { endpoint } = await rankEndpoint(store, 0, { incarnation: 'inc-2' });
    await endpoint.register();
    await endpoint.publish();
    const waiting = expect(endpoint.whenReady()).rejects.toThrow(
      new EndpointNotReadyError('draining', 'drain({ deadlineMs: 5000 })'),
    );
    await endpoint.drain({ deadlineMs: 5_000 });
    await waiting;
    await expect(endpoint.whenReady()).rejects.toMatchObject({ code: 'ENDPOINT_NOT_READY', state: 'drained' });
  });

  it('with endpoint.metricsPort set: serves its metrics at GET /metrics from register() until close()', async () => {
    const store = openStore();
    const held = await holdPort();
    const port = held.port;
    await new Promise((resolve) => held.server.close(resolve));
    const { endpoint } = await rankEndpoint(store, 0, {
      metrics: new EndpointMetrics({ labels: { rank: 'tp0' } }),
      metricsPort: port,
    });
    expect(endpoint.metricsListener).toBeUndefined();
    await endpoint.register();
    expect(endpoint.metricsListener).toMatchObject({
      host: '127.0.0.1',
      port,
      url: `http://127.0.0.1:${port}/metrics`,
    });
    const scraped = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain('kvreuse_endpoint_state{state="registered",rank="tp0"} 1');
    await endpoint.close();
    await expect(fetch(`http://127.0.0.1:${port}/metrics`)).rejects.toThrow();
  });

  it('with endpoint.metricsPort in use: register() rejects with MetricsPortError naming the port, registers nothing and can be retried', async () => {
    const store = openStore();
    const { server, port } = await holdPort();
    const { endpoint, transitions } = await rankEndpoint(store, 0, {
      metrics: new EndpointMetrics(),
      metricsPort: port,
    });
    const refused = endpoint.register();
    await expect(refused).rejects.toBeInstanceOf(MetricsPortError);
    await expect(refused).rejects.toMatchObject({
      code: 'METRICS_PORT_UNAVAILABLE',
      host: '127.0.0.1',
      port,
      systemCode: 'EADDRINUSE',
    });
    expect(endpoint.state).toBe('created');
    expect(endpoint.metricsListener).toBeUndefined();
    expect(transport.counters().liveRegistrations).toBe(0);
    expect(transitions.at(-1)?.reason).toContain(`cannot serve metrics on 127.0.0.1:${port}: the port is in use`);
    await new Promise((resolve) => server.close(resolve));
    await endpoint.register();
    expect(endpoint.metricsListener?.port).toBe(port);
  });

  it('a failed registration leaves every bank with its owner and the endpoint created; a retry succeeds', async () => {
    const store = openStore();
    const { endpoint, agent, transitions } = await rankEndpoint(store, 0);
    agent.faults.failNth('register', 30, 'NO_MEMORY');
    await expect(endpoint.register()).rejects.toThrow(/NO_MEMORY/);
    expect(endpoint.state).toBe('created');
    expect(endpoint.registered).toBeUndefined();
    expect(transport.counters().liveRegistrations).toBe(0);
    expect(transitions.map(({ to }) => to)).toEqual(['registering', 'created']);
    expect(transitions[1]?.reason).toMatch(/^registration failed: .*NO_MEMORY/);

    await endpoint.register();
    expect(endpoint.state).toBe('registered');
    expect(transport.counters().liveRegistrations).toBe(56);
  });

  it('closed without ever registering (a registration that failed and was not retried): every bank goes back to its owner', async () => {
    const store = openStore();
    const { endpoint, agent, transitions } = await rankEndpoint(store, 0);
    agent.faults.failNth('register', 30, 'NO_MEMORY');
    await expect(endpoint.register()).rejects.toThrow(/NO_MEMORY/);
    expect(transport.counters().liveAllocations).toBe(56);
    const closed = await endpoint.close();
    expect(closed.report.banksReturned).toHaveLength(56);
    expect(closed).toMatchObject({ banksRetained: [], retained: false, agentDestroyed: true });
    expect(transport.counters()).toMatchObject({ liveRegistrations: 0, liveAllocations: 0 });
    expect(transitions.map(({ to }) => to)).toEqual(['registering', 'created', 'closing', 'closed']);
  });

  it('close() while registering (a shutdown signal then) stops a registration without a timeout before its next bank: it is rolled back and refused naming closing, nothing left registered', async () => {
    const store = openStore();
    const { endpoint, agent, transitions, options } = await rankEndpoint(store, 0);
    let closing: ReturnType<ReuseEndpoint['close']> | undefined;
    const register = agent.register.bind(agent);
    let registrations = 0;
    // The close comes once the third bank is registered natively.
    vi.spyOn(agent, 'register').mockImplementation((region) => {
      const registered = register(region);
      if (++registrations === 3) closing = endpoint.close();
      return registered;
    });
    await expect(endpoint.register()).rejects.toThrow(new EndpointStateError('register', 'closing', ['created']));
    expect(closing).toBeDefined();
    const closed = await (closing as ReturnType<ReuseEndpoint['close']>);
    expect(closed).toMatchObject({ agentDestroyed: true, banksRetained: [] });
    expect(closed.report.banksReturned).toHaveLength(56);
    expect(registrations).toBe(3);
    expect(new Set(options.banks.map((bank) => bank.state))).toEqual(new Set(['returned']));
    expect(transitions.map(({ to }) => to)).toEqual(['registering', 'created', 'closing', 'closed']);
    expect(transitions[1]?.reason).toBe(
      'registration failed: register is not allowed while the endpoint is closing (only while created)',
    );
  });

  it('close() once registered, before the registration ends, refuses the publish() and drain() called then: they never run beside the close', async () => {
    const store = openStore();
    const { endpoint, transitions } = await rankEndpoint(store, 0);
    let closing: ReturnType<ReuseEndpoint['close']> | undefined;
    const refused: Promise<unknown>[] = [];
    endpoint.onTransition(({ to }) => {
      // Registered, the act not yet ended: the close waits for it.
      if (to !== 'registered') return;
      closing = endpoint.close();
      refused.push(
        expect(endpoint.publish()).rejects.toThrow(new EndpointStateError('publish', 'closing', ['registered'])),
        expect(endpoint.drain({ deadlineMs: 1_000 })).rejects.toThrow(
          new EndpointStateError('drain', 'closing', ['registered', 'published', 'ready']),
        ),
      );
    });
    await endpoint.register();
    expect((await (closing as ReturnType<ReuseEndpoint['close']>)).report.banksReturned).toHaveLength(56);
    expect(refused).toHaveLength(2);
    await Promise.all(refused);
    expect(transitions.map(({ to }) => to)).toEqual(registeredThenClosed);
    expect(await publishedKeys(store)).toEqual([]);
  });

  it('once close() is called, register(), publish() and drain() are refused naming closing before the close moves', async () => {
    const store = openStore();
    const never = await rankEndpoint(store, 0);
    const closingNever = never.endpoint.close();
    expect(never.endpoint.state).toBe('created');
    await expect(never.endpoint.register()).rejects.toThrow(new EndpointStateError('register', 'closing', ['created']));
    expect((await closingNever).report.banksReturned).toHaveLength(56);
    expect(never.transitions.map(({ to }) => to)).toEqual(['closing', 'closed']);

    const { endpoint, transitions } = await rankEndpoint(store, 1);
    await endpoint.register();
    const closing = endpoint.close();
    expect(endpoint.state).toBe('registered');
    const refused = [
      expect(endpoint.publish()).rejects.toThrow(new EndpointStateError('publish', 'closing', ['registered'])),
      expect(endpoint.drain({ deadlineMs: 1_000 })).rejects.toThrow(
        'drain is not allowed while the endpoint is closing (only while registered, published, ready)',
      ),
    ];
    await Promise.all(refused);
    expect((await closing).report.banksReturned).toHaveLength(56);
    expect(transitions.map(({ to }) => to)).toEqual(registeredThenClosed);
  });

  it('close() while publishing stops the publication at once, its discovery call still unanswered, and gives back what that call published once it answers', async () => {
    const store = openStore();
    const leaseAsked = deferred<void>();
    const leaseAnswer = deferred<void>();
    const leaseRevoked = deferred<void>();
    // The store's first lease is granted only once the test says so; a revoked lease is reported.
    const held = storeWith(store, {
      grantLease: async (ttlMs) => {
        leaseAsked.resolve();
        await leaseAnswer.promise;
        return store.grantLease(ttlMs);
      },
      revokeLease: async (lease) => {
        await store.revokeLease(lease);
        leaseRevoked.resolve();
      },
    });
    const { endpoint, transitions } = await rankEndpoint(held, 0);
    await endpoint.register();
    const refused = expect(endpoint.publish()).rejects.toThrow(
      new EndpointStateError('publish', 'closing', ['registered']),
    );
    await leaseAsked.promise;
    const closed = await endpoint.close();
    await refused;
    expect(closed).toMatchObject({ agentDestroyed: true, banksRetained: [] });
    expect(closed.report.banksReturned).toHaveLength(56);
    expect(transitions.map(({ to }) => to)).toEqual([
      'registering',
      'registered',
      'publishing',
      'registered',
      'draining',
      'drained',
      'closing',
      'closed',
    ]);
    expect(transitions[3]?.reason).toBe(
      'publication failed: publish is not allowed while the endpoint is closing (only while registered)',
    );
    leaseAnswer.resolve();
    await leaseRevoked.promise;
    expect(await publishedKeys(store)).toEqual([]);
  });

  it("close() while publishing, the rank part published: the close's drain withdraws it within the close's deadline and reports a withdrawal discovery left unanswered", async () => {
    const store = openStore();
    const watchAsked = deferred<void>();
    const watchAnswer = deferred<void>();
    const deleteAsked = deferred<void>();
    const deleteAnswer = deferred<void>();
    const deleted = deferred<void>();
    // The readiness watch and the rank part's deletion are answered only once the test says so.
    const held = storeWith(store, {
      watch: async (...args) => {
        watchAsked.resolve();
        await watchAnswer.promise;
        return store.watch(...args);
      },
      commit: async (...args) => {
        if (!args[0].every(({ type }) => type === 'delete')) return store.commit(...args);
        deleteAsked.resolve();
        await deleteAnswer.promise;
        const revision = await store.commit(...args);
        deleted.resolve();
        return revision;
      },
    });
    const clock = new ManualClock();
    const { endpoint } = await rankEndpoint(held, 0, { clock });
    await endpoint.register();
    const refused = expect(endpoint.publish()).rejects.toThrow(
      new EndpointStateError('publish', 'closing', ['registered']),
    );
    await watchAsked.promise;
    const closing = endpoint.close({ deadlineMs: 20 });
    await deleteAsked.promise;
    // What else the withdrawal step runs, all in this process, ends before the deadline is forced.
    await nextTurn();
    clock.advance(20);
    const closed = await closing;
    await refused;
    expect(closed.report.steps.find(({ step }) => step === 'withdraw-rank-parts')).toMatchObject({
      outcome: 'failed',
      error: 'the rank part was not withdrawn: the deadline passed first',
    });
    expect(closed).toMatchObject({ agentDestroyed: true, banksRetained: [] });
    expect(closed.report.banksReturned).toHaveLength(56);
    expect(await publishedKeys(store)).toHaveLength(1);
    deleteAnswer.resolve();
    watchAnswer.resolve();
    await deleted.promise;
    expect(await publishedKeys(store)).toEqual([]);
  });

  it.each([
    ['register', ['created']],
    ['publish', ['registered']],
    ['drain', ['registered', 'published', 'ready']],
  ] as const)(
    'refuses %s() at every stage the close of a registered endpoint reaches, naming closing, then closed',
    async (operation, allowed) => {
      const store = openStore();
      const { endpoint, transitions } = await rankEndpoint(store, 0);
      await endpoint.register();
      const call = {
        register: () => endpoint.register(),
        publish: () => endpoint.publish(),
        drain: () => endpoint.drain({ deadlineMs: 1_000 }),
      }[operation];
      const states: EndpointState[] = [];
      const refusals: Promise<unknown>[] = [];
      const refused = (state: EndpointState) => {
        states.push(state);
        const called = call();
        refusals.push(
          expect(called).rejects.toThrow(
            new EndpointStateError(operation, state === 'closed' ? 'closed' : 'closing', allowed),
          ),
          expect(called).rejects.toBeInstanceOf(EndpointStateError),
        );
      };
      endpoint.onTransition(({ to }) => refused(to));
      const closing = endpoint.close();
      refused(endpoint.state);
      expect((await closing).report.banksReturned).toHaveLength(56);
      await Promise.all(refusals);
      expect(states).toEqual(['registered', 'draining', 'drained', 'closing', 'closed']);
      expect(transitions.map(({ to }) => to)).toEqual(registeredThenClosed);
      expect(await publishedKeys(store)).toEqual([]);
    },
  );

  it('close() while draining: waits for the drain to end, then closes', async () => {
    const store = openStore();
    const { endpoint, transitions } = await rankEndpoint(store, 0);
    await endpoint.register();
    let closing: ReturnType<ReuseEndpoint['close']> | undefined;
    endpoint.onTransition(({ to }) => {
      if (to === 'draining') closing = endpoint.close();
    });
    const report = await endpoint.drain({ deadlineMs: 1_000 });
    expect(report.banksReturned).toHaveLength(56);
    expect(closing).toBeDefined();
    expect(await (closing as ReturnType<ReuseEndpoint['close']>)).toMatchObject({ agentDestroyed: true });
    expect(transitions.map(({ to }) => to)).toEqual(registeredThenClosed);
  });

  it('refuses calls its state does not allow, naming the call and the state, and changes nothing', async () => {
    const store = openStore();
    const { endpoint, transitions } = await rankEndpoint(store, 0);
    await expect(endpoint.publish()).rejects.toThrow(new EndpointStateError('publish', 'created', ['registered']));
    await expect(endpoint.drain({ deadlineMs: 1_000 })).rejects.toThrow(
      'drain is not allowed while the endpoint is created (only while registered, published, ready)',
    );
    await endpoint.register();
    await expect(endpoint.register()).rejects.toThrow(
      'register is not allowed while the endpoint is registered (only while created)',
    );
    await expect(endpoint.drain({ deadlineMs: -1 })).rejects.toThrow(
      new EndpointOptionError('deadlineMs', -1, 'a whole number of milliseconds, at least 0'),
    );
    await expect(endpoint.close({ deadlineMs: 1.5 })).rejects.toThrow(
      'endpoint option deadlineMs = 1.5 is refused: a whole number of milliseconds, at least 0',
    );
    expect([endpoint.state, transitions.map(({ to }) => to)]).toEqual(['registered', ['registering', 'registered']]);
    await endpoint.close();
    expect(() => endpoint.close()).not.toThrow();
    await expect(endpoint.drain({ deadlineMs: 1_000 })).rejects.toThrow(
      new EndpointStateError('drain', 'closed', ['registered', 'published', 'ready']),
    );
  });

  it('refuses drain() and close() options that are no object with a typed error, and changes nothing', async () => {
    const store = openStore();
    const { endpoint, transitions } = await rankEndpoint(store, 0);
    await endpoint.register();
    await expect(endpoint.drain(undefined as never)).rejects.toThrow(
      new EndpointOptionError('options', undefined, "drain()'s options: { deadlineMs }"),
    );
    await expect(endpoint.close(null as never)).rejects.toThrow(
      new EndpointOptionError('options', null, "close()'s options: { deadlineMs? }"),
    );
    await expect(endpoint.drain({} as never)).rejects.toThrow(
      'endpoint option deadlineMs = undefined is refused: a whole number of milliseconds, at least 0',
    );
    expect([endpoint.state, transitions.map(({ to }) => to)]).toEqual(['registered', ['registering', 'registered']]);
  });

  it('refuses register() options that are no object, a timeout that is no positive duration and a signal that is no AbortSignal before anything moves', async () => {
    const store = openStore();
    const { endpoint, transitions } = await rankEndpoint(store, 0);
    await expect(endpoint.register(null as never)).rejects.toThrow(
      new EndpointOptionError('options', null, "register()'s options: { timeoutMs?, signal? }"),
    );
    await expect(endpoint.register({ timeoutMs: -1 })).rejects.toThrow(
      new EndpointOptionError('timeoutMs', -1, 'a positive number of milliseconds'),
    );
    await expect(endpoint.register({ signal: 'stop' as never })).rejects.toThrow(
      new EndpointOptionError('signal', 'stop', 'an AbortSignal'),
    );
    expect([endpoint.state, transitions]).toEqual(['created', []]);
    // Only the timeout and the signal are read: the endpoint's own banks are registered.
    expect((await endpoint.register({ banks: [] } as never)).banks).toHaveLength(56);
  });

  it('keeps its own copy of the options: the caller changing its settings and bank list afterwards changes nothing', async () => {
    const store = openStore();
    const { endpoint, options } = await rankEndpoint(store, 0, { metricsPort: 0 });
    // A metrics port without the metrics the checks require, and no banks: both refused had they come first.
    Object.assign(options.settings.endpoint as object, { metricsPort: 9 });
    (options.banks as Bank[]).splice(0);
    expect((await endpoint.register()).banks).toHaveLength(56);
    expect(endpoint.metricsListener).toBeUndefined();
    expect((await endpoint.close()).report.banksReturned).toHaveLength(56);
  });

  it("keeps its own copy of the worker's geometry: the caller changing it afterwards changes nothing published", async () => {
    const store = openStore();
    const callerGeometry: Geometry = { ...geometry };
    const { endpoint } = await rankEndpoint(store, 0, { geometry: callerGeometry });
    // One layer would not match the 56 banks laid out for the geometry given: publishing it would be refused.
    callerGeometry.numLayers = 1;
    await endpoint.register();
    await endpoint.publish();
    expect(endpoint.state).toBe('published');
  });

  it('a newer incarnation superseding this one: the old endpoint is never ready again, the new one is', async () => {
    const store = openStore();
    /** Both ranks of one incarnation, registered and published; resolves with rank 0. */
    const startIncarnation = async (incarnation: string) => {
      const ranks = [await rankEndpoint(store, 0, { incarnation }), await rankEndpoint(store, 1, { incarnation })];
      for (const { endpoint } of ranks) {
        await endpoint.register();
        await endpoint.publish();
      }
      return ranks[0] as Awaited<ReturnType<typeof rankEndpoint>>;
    };
    const old0 = await startIncarnation('inc-1');
    await vi.waitFor(() => expect(old0.endpoint.state).toBe('ready'), { timeout: 20_000, interval: 5 });
    const new0 = await startIncarnation('inc-2');
    await vi.waitFor(() => expect(new0.endpoint.state).toBe('ready'), { timeout: 20_000, interval: 5 });
    await vi.waitFor(() => expect(old0.endpoint.state).toBe('published'), { timeout: 20_000, interval: 5 });
    expect(new0.endpoint.epoch).toBeGreaterThan(old0.endpoint.epoch as number);
  });

  it('checks its options before touching anything', () => {
    expect(() => new ReuseEndpoint(undefined as never)).toThrow(EndpointOptionError);
    expect(() => new ReuseEndpoint({ banks: [] } as never)).toThrow(
      'endpoint option agent = undefined is refused: an object',
    );
    const objects = { agent: {}, discovery: {}, worker: {}, rank: {}, settings: {}, banks: [{}] };
    expect(() => new ReuseEndpoint({ ...objects, secret: 'cluster.secret' } as never)).toThrow(
      'endpoint option secret = "cluster.secret" is refused: the ClusterSecret openClusterSecret(settings.discovery) returns',
    );
  });

  it('checks the serve options: an adapter, the bank bytes, a lease, an inventory, and no waitForReaders of its own', async () => {
    const agent = await transport.createAgent({ name: `serve-options-${process.pid}`, backend: 'loopback' });
    cleanups.push(() => agent.close());
    const base = {
      agent,
      discovery: new MemoryDiscoveryStore(),
      secret,
      worker: worker(),
      rank: { tpRank: 0, ppRank: 0 },
      banks: [{}] as never,
      settings,
      bankBytes: [],
    };
    const adapter = new BlockPool(2);
    const refused = (change: object, message: string) =>
      expect(() => new ReuseEndpoint({ ...base, ...change })).toThrow(message);
    refused({ serve: {} }, 'endpoint option serve = ');
    refused(
      { serve: { adapter }, bankBytes: undefined },
      "endpoint option bankBytes = undefined is refused: this rank's bank bytes",
    );
    refused({ serve: { adapter, leaseMs: 0 } }, 'endpoint option serve.leaseMs = 0 is refused');
    refused(
      { serve: { adapter, inventory: { tier: 'disk', retained: () => [], ttlMs: 1 } } },
      'endpoint option serve.inventory = ',
    );
    // Refused here, not by the first announcement once published: no follower reads an empty prefix.
    refused(
      { serve: { adapter, inventory: { tier: 'host', retained: () => [], ttlMs: 1, prefix: '' } } },
      'prefix?: a non-empty string }',
    );
    refused(
      { serve: { adapter }, waitForReaders: () => Promise.resolve({ released: 0, lapsed: 0, outstanding: 0 }) },
      'its pin server waits for the readers',
    );
    await base.discovery.close();
  });

  it('checks the endpoint settings it is given: the default verification must be a mode', async () => {
    const agent = await transport.createAgent({ name: `endpoint-settings-${process.pid}`, backend: 'loopback' });
    cleanups.push(() => agent.close());
    const base = {
      agent,
      discovery: new MemoryDiscoveryStore(),
      secret,
      worker: worker(),
      rank: { tpRank: 0, ppRank: 0 },
      banks: [{}] as never,
    };
    const refused = (endpoint: unknown, message: string) =>
      expect(() => new ReuseEndpoint({ ...base, settings: { ...settings, endpoint: endpoint as never } })).toThrow(
        message,
      );
    refused(
      { ...settings.endpoint, verify: 'some' },
      `endpoint option settings.endpoint.verify = "some" is refused: 'full', 'sampled' or 'off'`,
    );
    refused(null, 'endpoint option settings.endpoint = null is refused: the resolved endpoint settings');
    refused(
      { ...settings.endpoint, metricsPort: 9400 },
      'endpoint option metrics = undefined is refused: an EndpointMetrics for the listener: settings.endpoint.metricsPort is 9400',
    );
    expect(() => new ReuseEndpoint({ ...base, settings, calibration: {} as never })).toThrow(
      "endpoint option calibration = {} is refused: the router's TransferCalibration",
    );
    await base.discovery.close();
  });

  it('open: lays the banks out from the worker, allocates, registers and publishes them in one call; close hands them back', async () => {
    const store = new MemoryDiscoveryStore();
    cleanups.push(() => store.close());
    const agent = await transport.createAgent({ name: `decode-0-open-${process.pid}`, backend: 'loopback' });
    const endpoint = await ReuseEndpoint.open({
      agent,
      discovery: store,
      secret,
      worker: { ...worker('inc-open'), tpSize: 1 },
      rank: { tpRank: 0, ppRank: 0 },
      blocks: 2,
      settings,
    });
    expect(endpoint.state).toBe('ready');
    const { registered } = await endpoint.whenReady();
    const layout = layoutRankBanks(
      geometry,
      { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 },
      { address: 0n, blocks: 2 },
    );
    expect(registered.banks.map((bank) => bank.bytes)).toEqual(layout.map((bank) => bank.bytes));
    expect(endpoint.bankBytes?.map((bytes) => BigInt(bytes?.length ?? 0))).toEqual(layout.map((bank) => bank.bytes));
    const closed = await endpoint.close();
    expect(closed.report.banksReturned).toHaveLength(layout.length);
    expect(closed.agentDestroyed).toBe(true);
  });

  it('open: a refused option frees what it allocated and leaves the agent open; a failed publication closes the endpoint', async () => {
    const store = new MemoryDiscoveryStore();
    cleanups.push(() => store.close());
    const agent = await transport.createAgent({ name: `decode-0-open-refused-${process.pid}`, backend: 'loopback' });
    cleanups.push(() => agent.close());
    const options = {
      agent,
      discovery: store,
      secret,
      worker: { ...worker('inc-open-refused'), tpSize: 1 },
      rank: { tpRank: 0, ppRank: 0 },
      blocks: 2,
    };
    await expect(
      ReuseEndpoint.open({
        ...options,
        settings: { ...settings, endpoint: { ...settings.endpoint, metricsPort: 9464 } },
      }),
    ).rejects.toThrow(EndpointOptionError);
    await expect(ReuseEndpoint.open({ ...options, blocks: 0, settings })).rejects.toThrow(EndpointOptionError);
    await expect(ReuseEndpoint.open({ ...options, settings, registerTimeoutMs: -1 })).rejects.toThrow(
      new EndpointOptionError('registerTimeoutMs', -1, 'a positive number of milliseconds'),
    );
    await expect(ReuseEndpoint.open(undefined as never)).rejects.toThrow(
      new EndpointOptionError('options', undefined, 'an options object'),
    );
    expect(transport.counters()).toMatchObject({ liveAllocations: 0, liveAgents: 1 });
    vi.spyOn(store, 'grantLease').mockRejectedValueOnce(new Error('store is down'));
    await expect(ReuseEndpoint.open({ ...options, settings })).rejects.toThrow('store is down');
    expect(transport.counters()).toMatchObject({ liveRegistrations: 0, liveAllocations: 0, liveAgents: 0 });
  });
});
