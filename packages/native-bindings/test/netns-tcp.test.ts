// Two hosts, simulated: the cross-process proof with its two processes in two network namespaces
// joined by a veth pair. Separate network namespaces do not separate memory: UCX's shared-memory
// transports (sysv, posix, cma) still reach the other process and are what UCX picks by default, so
// both processes are held to tcp over the veth (UCX_TLS=tcp, UCX_NET_DEVICES=the veth), and the
// reader's endpoint report must show that and nothing else.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ucxTestsRun } from './support/backends.js';
import { namespaceTestsRun, openVethPair, tcpOverVeth, type VethPair } from './support/netns.js';
import { provePrefixPull } from './support/prefix-proof.js';

describe.runIf(ucxTestsRun && namespaceTestsRun)('two processes in two network namespaces, ucx over tcp', () => {
  let pair: VethPair;
  beforeAll(() => {
    pair = openVethPair();
  });
  afterAll(() => pair.close());

  it('B reads A’s 42-block Qwen3-0.6B prefix across the veth, every byte verified, on one tcp lane', async () => {
    const env = tcpOverVeth(pair);
    const path = await provePrefixPull('netns', {
      source: { launcher: pair.a.launcher, env },
      reader: { launcher: pair.b.launcher, env },
    });
    const lanes = [...path.matchAll(/lane\[\d+\]:\s+\d+:(\S+)/g)].map((match) => match[1]);
    expect(lanes).toEqual([`tcp/${pair.device}.0`]);
    expect(path).toMatch(/region \d+ of '[^']+': gets and puts through UCX/);
  }, 120_000);
});
