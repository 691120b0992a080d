import { DiscoveryClosedError, type DiscoveryStore, openDiscovery } from '@kvreuse/discovery';
import { type Agent, loadTransport } from '@kvreuse/native-bindings';
import { describe, expect, it, vi } from 'vitest';
import { defaultSettings } from '../settings/all-settings.js';
import { DemoRank, type DemoRankOptions, type DemoRankSteps } from './demo-rank.js';

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

const refusal = new Error('the endpoint refused to open');

/** What a rank's failed opening opened, with the real closes of what a test made fail to close. */
interface Opened {
  discovery?: DiscoveryStore;
  closeDiscovery?: DiscoveryStore['close'];
  closeAgent?: Agent['close'];
}

/**
 * The real steps, except an endpoint that refuses to open; `closed` lists what the rank closed, in order.
 * `failing` names what fails to close instead (the test then closes it with `opened`).
 */
function failingEndpoint(failing?: 'agent' | 'discovery'): { steps: DemoRankSteps; closed: string[]; opened: Opened } {
  const closed: string[] = [];
  const opened: Opened = {};
  const failedClose = (what: string): Promise<never> => Promise.reject(new Error(`the ${what} failed to close`));
  const steps: DemoRankSteps = {
    openDiscovery: (settings) => {
      const discovery = openDiscovery(settings);
      const close = discovery.close.bind(discovery);
      vi.spyOn(discovery, 'close').mockImplementation(() => {
        closed.push('discovery');
        return failing === 'discovery' ? failedClose('discovery') : close();
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
          return failing === 'agent' ? failedClose('agent') : close();
        });
        opened.closeAgent = close;
        return agent;
      });
      return transport;
    },
    openEndpoint: () => Promise.reject(refusal),
  };
  return { steps, closed, opened };
}

const noHost = { crash: () => undefined };

describe('a demo rank whose endpoint fails to open', () => {
  it('closes its agent, then its discovery store, and rejects with the endpoint’s error', async () => {
    const { steps, closed, opened } = failingEndpoint();
    await expect(DemoRank.open(optionsOf('closes-all'), () => undefined, noHost, steps)).rejects.toBe(refusal);
    expect(closed).toEqual(['agent', 'discovery']);
    await expect(opened.discovery?.get('/workers/')).rejects.toBeInstanceOf(DiscoveryClosedError);
  });

  it.each(['agent', 'discovery'] as const)(
    'rejects with the endpoint’s error, having closed everything, when its %s fails to close',
    async (failing) => {
      const { steps, closed, opened } = failingEndpoint(failing);
      try {
        await expect(DemoRank.open(optionsOf(`${failing}-fails`), () => undefined, noHost, steps)).rejects.toBe(
          refusal,
        );
        expect(closed).toEqual(['agent', 'discovery']);
      } finally {
        await opened.closeAgent?.();
        await opened.closeDiscovery?.();
      }
    },
  );
});
