// `kvreuse bench link`: the bandwidth and latency of a link between two hosts (or network namespaces),
// measured from the installed package as ucx_perftest and nixlbench measure them: one side listens,
// the other connects and measures reads and writes over UCX through the native facade.
import type { Command } from './command.js';
import { measureLink } from './bench-link/connect-side.js';
import { listenForPeer } from './bench-link/listen-side.js';
import { linkOptions, linkPlanOf } from './bench-link/options.js';
import { renderLinkTable } from './bench-link/report.js';
import { transportGroupHelp } from './help-groups.js';
import { requireUcxTransport } from './native.js';
import { renderDocument } from './output.js';
import { resolveCommandSettings, settingsHelp, settingsOptions } from './settings/command-settings.js';

export const benchLink: Command = {
  name: 'bench link',
  summary:
    'Measures the link to another host (or network namespace) over UCX, as ucx_perftest does: one side --listen, the other --connect <host:port>.',
  usage: '--listen [--address <ip>] [--port <port>] | --connect <host:port> [--sizes <list>] [options] [setting flags]',
  options: [...linkOptions, ...settingsOptions],
  help: () =>
    'The listener waits for one peer on a TCP port and gives it, over that connection, its UCX address and a region of its memory;\n' +
    'the peer then READs (UCX get) and WRITEs (UCX put) that region at each size, --iterations messages after --warmup ones,\n' +
    '--in-flight at a time, and prints per size and direction the median and mean latency of a message (post to completion, µs),\n' +
    'the bandwidth (GB/s = 10^9 bytes per second; bytesPerSecond in -o json) and the message rate. The first bytes read are\n' +
    "checked against the listener's. Both sides then close everything they opened; the listener exits once its peer is done.\n" +
    'Both sides run UCX whatever transport.backend says; transport.ucx_transports and transport.ucx_net_devices choose what UCX\n' +
    'may use (on one machine UCX prefers shared memory even across network namespaces: --transport-ucx-transports tcp keeps it on the network).\n\n' +
    settingsHelp(transportGroupHelp),
  async run(args, context) {
    const plan = linkPlanOf(args);
    const resolved = resolveCommandSettings(args, context);
    const { settings } = resolved;
    const transport = requireUcxTransport(this.name, resolved, context.cwd);
    if (plan.role === 'listen') {
      await listenForPeer(plan, transport, settings, context);
      return;
    }
    const report = await measureLink(plan, transport, settings, context);
    context.stdout(plan.format === undefined ? renderLinkTable(report) : renderDocument(plan.format, report));
  },
};
