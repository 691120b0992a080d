import { isIP } from 'node:net';
import { z } from 'zod';
import { defineGroup } from '@kvreuse/config';
import { verifyModes } from './pull-request.js';

const hostName = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** Whether `host` is an IPv4 or IPv6 address or a host name: what the metrics listener may bind to. */
export function isListenHost(host: string): boolean {
  return isIP(host) !== 0 || (host.length <= 253 && hostName.test(host));
}

/** The reuse endpoint each serving process runs. */
export const endpointGroup = defineGroup('endpoint', {
  description:
    'The reuse endpoint each serving process runs: how a pull checks what arrived, and where the process serves its metrics.',
  settings: {
    verify: {
      schema: z.enum(verifyModes),
      default: 'full',
      description:
        'How a pull checks the blocks it read before committing them, unless its request names its own mode. `full` ' +
        "compares every block's CRC-32 with the one the source computed over its bytes when it granted the pin: a " +
        'wrong or torn block is never committed, for a checksum pass over every pulled byte at the source and again ' +
        "at the puller. `sampled` compares every 8th block and the last: the puller's pass shrinks to about an " +
        'eighth (the source still checksums every block), and a bad block between two checked ones is committed. ' +
        '`off` compares nothing and asks the source for no checksums: the pull costs only the transfer, and only ' +
        'the transport vouches for the bytes. The receipt says which mode ran (`verify`) and how many blocks it ' +
        'checked (`checkedBlocks`).',
    },
    metricsPort: {
      schema: z.int().min(0).max(65_535),
      default: 0,
      unit: 'TCP port',
      description:
        "Serve the endpoint's Prometheus metrics at `GET /metrics` on this port of `metrics_host`. 0 (the default) " +
        'serves none. `kvreuse demo` runs several endpoint processes on one machine: the first serves on this port ' +
        'and each next one on the next port.',
    },
    metricsHost: {
      schema: z
        .string()
        .refine(isListenHost, {
          message: 'an IPv4 or IPv6 address or a host name',
        })
        .meta({ description: 'an IP address or host name' }),
      default: '127.0.0.1',
      description:
        'The address the metrics listener binds to when `metrics_port` is set. The metrics are served without ' +
        'authentication, so only this machine reaches them by default; `0.0.0.0` (or `::`) lets a scraper on another ' +
        'machine in.',
    },
  },
});
