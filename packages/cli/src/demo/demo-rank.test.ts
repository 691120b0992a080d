import { DiscoveryClosedError, type DiscoveryStore, openDiscovery } from '@kvreuse/discovery';
import { type Agent, loadTransport } from '@kvreuse/native-bindings';
import { type Bank, releaseBanks } from '@kvreuse/registry';
import { describe, expect, it, vi } from 'vitest';
import { defaultSettings } from '../settings/all-settings.js';
import { DemoRank, type DemoRankOptions, type DemoRankSteps } from './demo-rank.js';

// releaseBanks as it is, which a test can make reject once.
vi.mock('@kvreuse/registry', async (importOriginal) => {
  const registry = await importOriginal<typeof import('@kvreuse/registry')>();
  return { ...registry, releaseBanks: vi.fn(registry.releaseBanks) };
});

/** A decode rank on loopback and memory discovery; each test's incarnation names its agent apart. */
const optionsOf = (incarnation: string): DemoRankOptions => ({
  role: 'decode',
  workerId: 'decode-0',
  incarnation,
  tpRank: 0,
  tpSize: 1,
  peerWorkerId: 'prefill-0',
  backend: 'loopback',
  blocks: 4,
  settings: { ...defaultSettings, discovery: { ...defaultSettings.discovery, backend: 'memory' } },
});

/** What a rank's failed opening opened, with the real closes of what a test made fail to close. */
interface Opened {
  discovery?: DiscoveryStore;
  closeDiscovery?: DiscoveryStore['close'];
  closeAgent?: Agent['close'];
}

/**
 * The real steps, except an endpoint that refuses to open; `closed` lists what the rank closed, in order.
 * `failing` names what fails to close instead (the test then closes it with `opened`). Vram banks are
 * none, allocated by a fake; releasing them fails as `failing` says.
 */
function failingEndpoint(...failing: readonly ('banks' | 'agent' | 'discovery')[]): {
  steps: DemoRankSteps;
  refusal: Error;
  closed: string[];
  opened: Opened;
} {
  // Its own for each rank: a failure to close the store is kept as its cause.
  const refusal = new Error('the endpoint refused to open');
  const closed: string[] = [];
  const opened: Opened = {};
  const failedClose = (what: string): Promise<never> => Promise.reject(new Error(`the ${what} failed to close`));
  const steps: DemoRankSteps = {
    openDiscovery: (settings) => {
      const discovery = openDiscovery(settings);
      const close = discovery.close.bind(discovery);
      vi.spyOn(discovery, 'close').mockImplementation(() => {
        closed.push('discovery');
        return failing.includes('discovery') ? failedClose('discovery') : close();
      });
      opened.discovery = discovery;
      opened.closeDiscovery = close;
      return discovery;
    },
    loadTransport: (loading) => {
      const transport = loadTransport(loading);
      const createAgent = transport.createAgent.bind(transport);
      vi.spyOn(transport, 'createAgent').mockImplementation(async (agentOptions) => {
        const agent = await createAgent(agentOptions);
        const close = agent.close.bind(agent);
        vi.spyOn(agent, 'close').mockImplementation(() => {
          closed.push('agent');
          return failing.includes('agent') ? failedClose('agent') : close();
        });
        opened.closeAgent = close;
        return agent;
      });
      return transport;
    },
    allocateVramBanks: async () => {
      vi.mocked(releaseBanks).mockImplementationOnce(async () => {
        closed.push('banks');
        if (failing.includes('banks')) throw new Error('the banks failed to release');
        return { returned: [], referenced: [], retained: [], unreturned: [] };
      });
      return { banks: [] as Bank[], hostCopies: [], upload: () => undefined };
    },
    openEndpoint: () => Promise.reject(refusal),
  };
  return { steps, refusal, closed, opened };
}

const noHost = { crash: () => undefined };

describe('a demo rank whose endpoint fails to open', () => {
  it('closes its agent, then its discovery store, and rejects with the endpoint’s error', async () => {
    const { steps, refusal, closed, opened } = failingEndpoint();
    await expect(DemoRank.open(optionsOf('closes-all'), () => undefined, noHost, steps)).rejects.toBe(refusal);
    expect(closed).toEqual(['agent', 'discovery']);
    await expect(opened.discovery?.get('/workers/')).rejects.toBeInstanceOf(DiscoveryClosedError);
  });

  it.each([
    ['agent', 'demo rank decode-0 tp0 failed open: closing its agent failed: the agent failed to close'],
    ['discovery', 'the discovery failed to close'],
  ] as const)(
    'rejects with the endpoint’s error, having closed everything, when its %s fails to close, which it keeps as its cause',
    async (failing, causeMessage) => {
      const { steps, refusal, closed, opened } = failingEndpoint(failing);
      try {
        await expect(DemoRank.open(optionsOf(`${failing}-fails`), () => undefined, noHost, steps)).rejects.toBe(
          refusal,
        );
        expect(closed).toEqual(['agent', 'discovery']);
        expect(refusal.cause).toEqual(expect.objectContaining({ message: causeMessage }));
      } finally {
        await opened.closeAgent?.();
        await opened.closeDiscovery?.();
      }
    },
  );

  it('with its banks in vram that fail to release and an agent that fails to close, keeps both on the endpoint’s error', async () => {
    const { steps, refusal, closed, opened } = failingEndpoint('banks', 'agent');
    const vram: DemoRankOptions = {
      ...optionsOf('banks-and-agent-fail'),
      memory: 'vram',
      settings: { ...optionsOf('').settings, profile: { name: 'qwen3-0.6b-bf16-b64', file: '' } },
    };
    try {
      await expect(DemoRank.open(vram, () => undefined, noHost, steps)).rejects.toBe(refusal);
      expect(closed).toEqual(['banks', 'agent', 'discovery']);
      expect(refusal.cause).toEqual(
        expect.objectContaining({
          constructor: AggregateError,
          errors: [new Error('the banks failed to release'), new Error('the agent failed to close')],
          message:
            'demo rank decode-0 tp0 failed open: releasing its banks failed: the banks failed to release; ' +
            'closing its agent failed: the agent failed to close',
        }),
      );
    } finally {
      await opened.closeAgent?.();
    }
  });
});

/** Makes `method` of `target` do what it does, then reject with `failure`, once. */
function failAfterwards<T extends object, K extends keyof T>(target: T, method: K, failure: Error): void {
  const real = (target[method] as () => Promise<unknown>).bind(target);
  vi.spyOn(target, method as never).mockImplementationOnce((async () => {
    await real();
    throw failure;
  }) as never);
}

/** What `promise` rejects with; undefined if it resolves. */
const rejectionOf = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => undefined,
    (error: unknown) => error,
  );

describe('a demo rank whose crash or shutdown has a step that fails', () => {
  it('crashes on through the rest, its discovery store closed after its agent failed to close, then says so', async () => {
    const rank = await DemoRank.open(optionsOf('crash-agent-fails'), () => undefined, noHost);
    const agentFailure = new Error('the agent failed to close');
    failAfterwards(rank.agent, 'close', agentFailure);

    const crashed = await rejectionOf(rank.crash());

    await expect(rank.discovery.get('/workers/')).rejects.toBeInstanceOf(DiscoveryClosedError);
    expect(crashed).toEqual(
      expect.objectContaining({
        constructor: AggregateError,
        errors: [agentFailure],
        message: 'demo rank decode-0 tp0 crash: closing its agent failed: the agent failed to close',
      }),
    );
  });

  it('closes its discovery store after its endpoint’s shutdown failed, then reports both failures in order', async () => {
    const rank = await DemoRank.open(optionsOf('shutdown-fails'), () => undefined, noHost);
    const endpointFailure = new Error('the shutdown failed');
    const discoveryFailure = new Error('the store failed to close');
    failAfterwards(rank.endpoint, 'close', endpointFailure);
    failAfterwards(rank.discovery, 'close', discoveryFailure);

    const shutdown = await rejectionOf(rank.close());

    expect(rank.discovery.close).toHaveBeenCalledOnce();
    await expect(rank.discovery.get('/workers/')).rejects.toBeInstanceOf(DiscoveryClosedError);
    expect(shutdown).toEqual(
      expect.objectContaining({
        constructor: AggregateError,
        errors: [endpointFailure, discoveryFailure],
        message:
          'demo rank decode-0 tp0 shutdown: shutting its endpoint down failed: the shutdown failed; ' +
          'closing its discovery store failed: the store failed to close',
      }),
    );
  });
});
