// The UCX agent either side of `kvreuse bench link` measures with, confined as the transport settings say.
import type { Agent, Transport } from '@kvreuse/native-bindings';
import type { Settings } from '../settings/all-settings.js';

/** A ucx agent named after its side and this process, with the settings' heartbeat, devices and transports. */
export function createLinkAgent(transport: Transport, side: 'listen' | 'connect', settings: Settings): Promise<Agent> {
  return transport.createAgent({
    name: `kvreuse-bench-${side}-${process.pid}`,
    backend: 'ucx',
    heartbeat: settings.transport,
    ucx: { netDevices: settings.transport.ucxNetDevices, transports: settings.transport.ucxTransports },
  });
}
