import { ClusterSecret } from '@kvreuse/discovery';
import { type Agent, type HeartbeatOptions, loadTransport, type Notification } from '@kvreuse/native-bindings';
import { BlockPool } from '../../src/block-pool.js';
import { PinChannel } from '../../src/pin-auth.js';
import type { PinServer } from '../../src/pin-server.js';
import { ManualClock } from './manual-clock.js';

export const transport = loadTransport();

/**
 * A source agent and a reader agent on loopback, each with the other loaded as a peer and its pin channel
 * (under this process's cluster secret), a block pool
 * holding blocks 10n, 11n and 12n in slots 0 to 2 (of 4), and a manual clock. The agents go into `agents` for closing.
 */
export async function loopbackPins(prefix: string, agents: Agent[], heartbeat?: HeartbeatOptions) {
  const sourceAgent = await transport.createAgent({
    name: `${prefix}-source-${process.pid}-${agents.length}`,
    backend: 'loopback',
  });
  const readerAgent = await transport.createAgent({
    name: `${prefix}-reader-${process.pid}-${agents.length + 1}`,
    backend: 'loopback',
    ...(heartbeat === undefined ? {} : { heartbeat }),
  });
  agents.push(sourceAgent, readerAgent);
  const readerPeer = sourceAgent.loadPeer(readerAgent.metadata());
  const sourcePeer = readerAgent.loadPeer(sourceAgent.metadata());
  const pool = new BlockPool(4);
  for (const hash of [10n, 11n, 12n]) pool.commit(pool.allocate(), hash);
  const secret = ClusterSecret.ofThisProcess();
  return {
    sourceAgent,
    readerAgent,
    readerPeer,
    sourcePeer,
    secret,
    sourceChannel: new PinChannel({ agent: sourceAgent, secret }),
    readerChannel: new PinChannel({ agent: readerAgent, secret }),
    pool,
    clock: new ManualClock(),
  };
}

/** Has `server` take `notification` and answer what it took: whether it took it. */
export async function answered(server: PinServer, notification: Notification): Promise<boolean> {
  const taken = server.receive(notification);
  await server.settled();
  return taken;
}
