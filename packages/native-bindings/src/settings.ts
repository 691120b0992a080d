import { z } from 'zod';
import { defineGroup } from '@kvreuse/config';
import { transportBackends } from '@kvreuse/descriptors';

/** The native transport and its deadlines. */
export const transportGroup = defineGroup('transport', {
  description: 'The native transport that moves KV blocks between workers, and its deadlines.',
  settings: {
    backend: {
      schema: z.enum(transportBackends),
      default: 'ucx',
      description:
        '`ucx` moves bytes through UCX (shared memory, TCP or RDMA, whatever the machine offers); ' +
        '`loopback` moves them inside one process, for tests and single-process demos.',
    },
    library: {
      schema: z.string(),
      default: '',
      description:
        'Path of the native transport library (libkvreuse_transport) to load; empty loads the one ' +
        '`@kvreuse/native-bindings` finds by default.',
    },
    ucxNetDevices: {
      schema: z
        .string()
        .regex(/^[\x21-\x7e]{0,255}$/, { message: 'expected a comma-separated device list without spaces' }),
      default: '',
      description:
        "The network devices a `ucx` agent may use (UCX's NET_DEVICES), comma-separated: `lo` keeps it on this " +
        'machine, `mlx5_0:1,eth1` names the RDMA port and interface of the isolated transfer network. Empty leaves ' +
        'the choice to UCX (its `UCX_NET_DEVICES`, else every device: its tcp transport then listens on every ' +
        'interface address). Confine it; UCX authenticates no peer (see docs/security.md).',
    },
    ucxTransports: {
      schema: z
        .string()
        .regex(/^[\x21-\x7e]{0,255}$/, { message: 'expected a comma-separated transport list without spaces' }),
      default: '',
      description:
        "The transports a `ucx` agent may use (UCX's TLS), comma-separated: `sm,self` for one machine, `rc,sm,self` " +
        'for RDMA, `tcp,sm,self` over TCP. Empty leaves the choice to UCX (its `UCX_TLS`, else every transport it finds).',
    },
    operationTimeoutMs: {
      schema: z.int().positive(),
      default: 1000,
      unit: 'ms',
      description:
        'A transfer not complete by then fails its request, which recomputes instead. The operation keeps ' +
        'its memory until it is quiescent.',
    },
    abandonTimeoutMs: {
      schema: z.int().positive(),
      default: 5000,
      unit: 'ms',
      description:
        'A transfer still not terminal this long after it was posted is abandoned: quarantined, its banks ' +
        'retained until the native layer proves it terminal or the process exits. At least twice ' +
        '`operation_timeout_ms`.',
    },
    heartbeatIntervalMs: {
      schema: z.int().min(10).max(60_000),
      default: 500,
      unit: 'ms',
      description:
        'How often the native transport probes each peer that has transfers in flight or holds pins; the ' +
        "peer's progress thread answers. Catches a peer that is stopped or hung, which the transport's own " +
        'keepalive misses over tcp.',
    },
    heartbeatMisses: {
      schema: z.int().min(1).max(1000),
      default: 3,
      unit: 'intervals',
      description:
        'A peer that answers no probe for this many `heartbeat_interval_ms` in a row is reported unresponsive, ' +
        'so that its transfers can be cancelled and it can be routed around; it is reported responsive again ' +
        'once it answers.',
    },
    shutdownDeadlineMs: {
      schema: z.int().positive(),
      default: 10_000,
      unit: 'ms',
      description:
        'How long shutdown waits for in-flight transfers to become quiescent before it reports the rest ' +
        'as quarantined and completes. At least `abandon_timeout_ms`, so that every transfer reaches its ' +
        'abandon deadline before shutdown gives up on it.',
    },
  },
  rules: [
    {
      setting: 'abandonTimeoutMs',
      related: ['operationTimeoutMs'],
      rule: 'transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms',
      why: 'a transfer that timed out gets at least as long again to become terminal before it is quarantined.',
      holds: (transport) => transport.abandonTimeoutMs >= 2 * transport.operationTimeoutMs,
    },
    {
      setting: 'shutdownDeadlineMs',
      related: ['abandonTimeoutMs'],
      rule: 'transport.shutdown_deadline_ms ≥ transport.abandon_timeout_ms',
      why: 'every in-flight transfer reaches its abandon deadline before shutdown gives up on it.',
      holds: (transport) => transport.shutdownDeadlineMs >= transport.abandonTimeoutMs,
    },
  ],
});
