// The listening side of `kvreuse bench link`: it waits on a TCP port for one peer, registers a region
// of the size the peer asks for, filled with a pattern, answers with its transport metadata, and
// serves the peer's reads and writes (its progress thread does; nothing runs here per message) until
// the peer says it is done.
import type { Agent, Transport } from '@kvreuse/native-bindings';
import type { CliContext } from '../command.js';
import { PeerProtocolError } from '../errors.js';
import type { Settings } from '../settings/all-settings.js';
import { createLinkAgent } from './link-agent.js';
import { maxMessageBytes, type ListenPlan } from './options.js';
import { doneMessage, fillPattern, helloMessage, type LineChannel, LinkListener } from './rendezvous.js';
import { Teardown } from './teardown.js';

const say = (context: CliContext, text: string): void => context.stderr(`kvreuse bench link: ${text}\n`);

/** Registers the region the hello asks for and answers with the metadata; refuses a size it does not serve. */
async function serve(channel: LineChannel, agent: Agent, bytes: number, teardown: Teardown): Promise<void> {
  if (bytes > maxMessageBytes) {
    channel.send({ refused: `${bytes} bytes is more than the ${maxMessageBytes} bytes a message may have` });
    throw new PeerProtocolError(channel.peer, `asked for ${bytes} bytes, more than ${maxMessageBytes}`);
  }
  const bank = teardown.add(await agent.allocate(bytes), (allocation) => allocation.free());
  const seed = Math.floor(Math.random() * 256);
  bank.view().fill(fillPattern(seed));
  const region = teardown.add(agent.register(bank), (registered) => registered.deregister());
  channel.send({ metadata: agent.metadata().toString('base64'), region: region.id, bytes, seed });
}

/** Listens, serves one peer to its end, and leaves nothing open. */
export async function listenForPeer(
  plan: ListenPlan,
  transport: Transport,
  settings: Settings,
  context: CliContext,
): Promise<void> {
  const teardown = new Teardown(context);
  try {
    const agent = teardown.add(await createLinkAgent(transport, 'listen', settings), (opened) => opened.close());
    const listener = teardown.add(await LinkListener.open(plan.address, plan.port), (opened) => opened.close());
    say(
      context,
      `listening on ${plan.address}:${listener.port}; on the other host run: kvreuse bench link --connect <this host>:${listener.port}`,
    );
    const channel = teardown.add(await listener.accept(plan.connectTimeoutMs), (opened) => opened.close());
    const hello = await channel.next(helloMessage, 'the hello', plan.timeoutMs);
    say(context, `${channel.peer} connected; it reads and writes ${hello.bytes} bytes of this side's memory`);
    await serve(channel, agent, hello.bytes, teardown);
    await channel.next(doneMessage, 'the end of the measurement', undefined);
    say(context, `${channel.peer} is done`);
  } finally {
    await teardown.close();
  }
}
