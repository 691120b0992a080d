// ReuseEndpoint.open over banks the caller adopted: a refused option takes nothing, the banks stay the caller's.
import { layoutRankBanks } from '@kvreuse/descriptors';
import { ClusterSecret, MemoryDiscoveryStore } from '@kvreuse/discovery';
import { Bank, frameworkOwner } from '@kvreuse/registry';
import { describe, expect, it } from 'vitest';
import { cleanupsAfterEach } from '../test/support/endpoint-cleanups.js';
import { testGeometry, transport } from '../test/support/endpoint-workers.js';
import { defaultSettings } from '../test/support/settings.js';
import { EndpointOptionError } from './errors.js';
import { ReuseEndpoint, type OpenRankOptions } from './reuse-endpoint.js';

const { cleanups } = cleanupsAfterEach();

describe('ReuseEndpoint.open over adopted banks', () => {
  it('a refused option leaves the banks with the caller, untouched: none is released, and they open once the options are right', async () => {
    const store = new MemoryDiscoveryStore();
    cleanups.push(() => store.close());
    const agent = await transport.createAgent({ name: `open-adopted-${process.pid}`, backend: 'loopback' });
    cleanups.push(() => agent.close());
    const released: number[] = [];
    const layout = layoutRankBanks(
      testGeometry,
      { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 },
      { address: 0n, blocks: 2 },
    );
    const banks = await Promise.all(
      layout.map(async (bank, index) => {
        const allocation = await agent.allocate(bank.bytes);
        const release = () => {
          released.push(index);
          return allocation.free();
        };
        return Bank.adopt(
          { ...bank, tpRank: 0, ppRank: 0, index, address: allocation.address },
          frameworkOwner(index, release),
        );
      }),
    );
    const options: OpenRankOptions = {
      agent,
      discovery: store,
      secret: ClusterSecret.ofThisProcess(),
      worker: {
        workerId: 'decode-0',
        incarnation: 'inc-adopted',
        role: 'decode',
        geometry: testGeometry,
        tpSize: 1,
        ppSize: 1,
        dpRank: 0,
      },
      rank: { tpRank: 0, ppRank: 0 },
      banks,
      settings: defaultSettings,
    };
    await expect(ReuseEndpoint.open({ ...options, registerTimeoutMs: -1 })).rejects.toThrow(
      new EndpointOptionError('registerTimeoutMs', -1, 'a positive number of milliseconds'),
    );
    await expect(ReuseEndpoint.open({ ...options, secret: 'cluster.secret' as never })).rejects.toThrow(
      /^endpoint option secret = "cluster.secret" is refused/,
    );
    await expect(ReuseEndpoint.open({ ...options, serve: {} as never })).rejects.toThrow(
      /^endpoint option serve = \{\} is refused/,
    );
    await expect(ReuseEndpoint.open({ ...options, blocks: 2 } as never)).rejects.toThrow(
      /^endpoint option banks = .* is refused: left out when open\(\) allocates the banks/,
    );
    expect(released).toEqual([]);
    expect(new Set(banks.map((bank) => bank.state))).toEqual(new Set(['owned']));

    const endpoint = await ReuseEndpoint.open(options);
    expect(endpoint.state).toBe('ready');
    const closed = await endpoint.close();
    expect(closed.report.banksReturned).toHaveLength(banks.length);
    expect(released.sort((a, b) => a - b)).toEqual(banks.map((_, index) => index));
  });
});
