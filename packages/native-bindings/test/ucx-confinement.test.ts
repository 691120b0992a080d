// A UCX agent confined by `ucx: { netDevices, transports }` (UCX's NET_DEVICES and TLS, per agent): over
// tcp confined to the loopback device, every socket it listens on is bound to 127.0.0.1 — where an agent
// left to UCX's choice listens on the machine's other interfaces too — and a READ between two confined
// agents still moves every byte. A device UCX does not have fails the agent's start with UCX's reason.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import type { Agent, UcxConfinement } from '@kvreuse/native-bindings';
import { agentName, transport, ucxTestsRun } from './support/backends.js';
import { findPatternMismatch, piecewiseDescriptors } from './support/content.js';
import { openPair, readRequest } from './support/pair.js';

/** The local addresses (hex, as /proc/net/tcp writes them) of the TCP sockets this process listens on. */
function listeningAddresses(): Set<string> {
  const inodes = new Set(
    readdirSync('/proc/self/fd').flatMap((fd) => {
      try {
        return [/^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`))?.[1] ?? ''];
      } catch {
        return [];
      }
    }),
  );
  const addresses = new Set<string>();
  for (const table of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local address, state (0A: listening), inode
      if (fields[3] === '0A' && inodes.has(fields[9] ?? '')) addresses.add(fields[1] ?? '');
    }
  }
  return addresses;
}

/** The addresses the agent made this process listen on (with no other agent opening between). */
async function listenedBy(ucx: UcxConfinement | undefined): Promise<{ agent: Agent; addresses: string[] }> {
  const before = listeningAddresses();
  const agent = await transport.createAgent({
    name: agentName('confined'),
    backend: 'ucx',
    ...(ucx === undefined ? {} : { ucx }),
  });
  return { agent, addresses: [...listeningAddresses()].filter((address) => !before.has(address)) };
}

const loopbackHex = '0100007F';
const otherInterfaces = Object.entries(networkInterfaces()).some(
  ([name, addresses]) => name !== 'lo' && (addresses ?? []).some((address) => address.family === 'IPv4'),
);

describe.runIf(ucxTestsRun)('a UCX agent confined to devices and transports', () => {
  it('over tcp on the loopback device, listens on 127.0.0.1 alone', async () => {
    const { agent, addresses } = await listenedBy({ netDevices: 'lo', transports: 'tcp' });
    expect(addresses.length).toBeGreaterThan(0);
    expect(addresses.every((address) => address.startsWith(`${loopbackHex}:`))).toBe(true);
    await agent.close();
  });

  it.runIf(otherInterfaces)(
    'left to UCX over tcp, listens on the other interfaces as well: what confining removes',
    async () => {
      const { agent, addresses } = await listenedBy({ transports: 'tcp' });
      expect(addresses.some((address) => !address.startsWith(`${loopbackHex}:`))).toBe(true);
      await agent.close();
    },
  );

  it('moves every byte of a READ between two agents confined to tcp on the loopback device', async () => {
    const pair = await openPair('ucx', 16 * 4096, 29, { ucx: { netDevices: 'lo', transports: 'tcp' } });
    const read = pair.reader.post(readRequest(pair, piecewiseDescriptors(16, 4096)));
    await expect(read.done).resolves.toEqual({ bytesDone: 16 * 4096 });
    read.release();
    expect(findPatternMismatch(pair.readerBank.view(), 29)).toBe(-1);
    await pair.close();
  });

  it('fails to start on a device UCX does not have, with UCX’s reason; refuses a value that is not printable', async () => {
    await expect(
      transport.createAgent({
        name: agentName('nowhere'),
        backend: 'ucx',
        ucx: { netDevices: 'no-such-device0', transports: 'tcp' },
      }),
    ).rejects.toMatchObject({ code: 'BACKEND' });
    await expect(
      transport.createAgent({ name: agentName('spaced'), backend: 'ucx', ucx: { netDevices: 'lo eth0' } }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'ucx.netDevices' });
  });
});
