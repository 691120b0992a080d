// The connecting side of `kvreuse bench link`: it asks the listener for a region as large as its
// largest message, loads the listener's metadata, then measures each size in each direction over UCX.
import type { Agent, Peer, PostRequest, Region, Transport } from '@kvreuse/native-bindings';
import { z } from 'zod';
import type { CliContext } from '../command.js';
import { PeerProtocolError } from '../errors.js';
import type { Settings } from '../settings/all-settings.js';
import { createLinkAgent } from './link-agent.js';
import { type LinkMeasurement, measure, oneMessage } from './measure.js';
import type { ConnectPlan } from './options.js';
import { acceptMessage, connectToListener, fillPattern, type LineChannel, refuseMessage } from './rendezvous.js';
import { type LinkReport, lanesOf } from './report.js';
import { Teardown } from './teardown.js';

const answerMessage = z.union([acceptMessage, refuseMessage]);

/** The listener's answer to the hello: its peer, loaded, and the region it registered. */
async function rendezvous(
  channel: LineChannel,
  agent: Agent,
  bytes: number,
  timeoutMs: number,
): Promise<{ peer: Peer; region: number; seed: number }> {
  channel.send({ bytes });
  const answer = await channel.next(answerMessage, 'the answer to the hello', timeoutMs);
  if ('refused' in answer) throw new PeerProtocolError(channel.peer, `refused the measurement: ${answer.refused}`);
  if (answer.bytes < bytes)
    throw new PeerProtocolError(channel.peer, `registered ${answer.bytes} bytes where ${bytes} were asked for`);
  return { peer: agent.loadPeer(Buffer.from(answer.metadata, 'base64')), region: answer.region, seed: answer.seed };
}

/** Throws when the first `bytes` of `bank` are not the listener's pattern: the reads did not move its bytes. */
function verifyRead(bank: Buffer, bytes: number, seed: number, peer: string): void {
  const expected = Buffer.alloc(bytes).fill(fillPattern(seed));
  if (!bank.subarray(0, bytes).equals(expected)) {
    const at = expected.findIndex((byte, index) => bank[index] !== byte);
    throw new PeerProtocolError(peer, `holds other bytes than those read from it: byte ${at} differs`);
  }
}

async function measureAll(
  plan: ConnectPlan,
  agent: Agent,
  base: Omit<PostRequest, 'descriptors' | 'direction'>,
  verify: () => void,
  peer: string,
): Promise<LinkMeasurement[]> {
  const results: LinkMeasurement[] = [];
  for (const direction of plan.directions) {
    for (const bytes of plan.sizes)
      results.push(await measure(agent, oneMessage(base, direction, bytes), { ...plan, peer }));
    if (direction === 'read') verify();
  }
  return results;
}

/** Measures the link to the listener the plan names, and leaves nothing open. */
export async function measureLink(
  plan: ConnectPlan,
  transport: Transport,
  settings: Settings,
  context: CliContext,
): Promise<LinkReport> {
  const teardown = new Teardown(context);
  try {
    const channel = teardown.add(await connectToListener(plan.host, plan.port, plan.timeoutMs), (opened) =>
      opened.close(),
    );
    const agent = teardown.add(await createLinkAgent(transport, 'connect', settings), (opened) => opened.close());
    const largest = Math.max(...plan.sizes);
    const bank = teardown.add(await agent.allocate(largest), (allocation) => allocation.free());
    bank.view().fill(0);
    const region: Region = teardown.add(agent.register(bank), (registered) => registered.deregister());
    const remote = await rendezvous(channel, agent, largest, plan.timeoutMs);
    const largestRead = plan.directions.includes('read') ? largest : 0;
    const results = await measureAll(
      plan,
      agent,
      { peer: remote.peer, localRegions: [region], remoteRegions: [remote.region] },
      () => verifyRead(bank.view(), largestRead, remote.seed, channel.peer),
      channel.peer,
    );
    const path = remote.peer.transport();
    await channel.sendLast({ done: true });
    return {
      peer: channel.peer,
      transport: path,
      lanes: lanesOf(path),
      warmup: plan.warmup,
      inFlight: plan.inFlight,
      verified: largestRead > 0,
      results,
    };
  } finally {
    await teardown.close();
  }
}
