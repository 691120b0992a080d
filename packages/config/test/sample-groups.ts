// Groups shaped like the ones kvreuse's packages declare (same group and setting names, a subset of their
// settings, terse descriptions), so the mechanism is tested here without depending on the packages above.
// Built with the `defineGroup` given, so that a second installed copy of the package can build them too.
import { z } from 'zod';
import { defineGroup } from '../src/index.js';

const millisecond = (value: number) => ({ schema: z.int().positive(), default: value, unit: 'ms' });

const sampleRouterGroup = (define: typeof defineGroup) =>
  define('router', {
    description: 'Sample: reuse switches and a cost model.',
    settings: {
      enableDecodeToPrefillReuse: { schema: z.boolean(), default: false, description: 'Sample: reuse on or off.' },
      enableDecodeToPrefillGpuReuse: { schema: z.boolean(), default: false, description: 'Sample: GPU reuse too.' },
      minimumEstimatedTtftSavingMs: {
        schema: z.number().min(0),
        default: 5,
        unit: 'ms',
        description: 'Sample: the margin a pull must win by.',
      },
      minimumTransferPrefixBlocks: {
        schema: z.int().min(1),
        default: 4,
        unit: 'blocks',
        description: 'Sample: the shortest prefix worth pulling.',
      },
      transferSourceEstimatedBlockUs: {
        schema: z.number().positive(),
        default: 100,
        unit: 'µs per block',
        description: 'Sample: the estimated time of one block.',
      },
    },
    rules: [
      {
        setting: 'enableDecodeToPrefillGpuReuse',
        related: ['enableDecodeToPrefillReuse'],
        rule: 'router.enable_decode_to_prefill_gpu_reuse requires router.enable_decode_to_prefill_reuse',
        why: 'sample: GPU reuse is a kind of reuse.',
        holds: (router) => !router.enableDecodeToPrefillGpuReuse || router.enableDecodeToPrefillReuse,
      },
    ],
  });

const sampleTransportGroup = (define: typeof defineGroup) =>
  define('transport', {
    description: 'Sample: a transport and its deadlines.',
    settings: {
      backend: { schema: z.enum(['ucx', 'loopback']), default: 'ucx', description: 'Sample: the backend.' },
      library: { schema: z.string(), default: '', description: 'Sample: a path.' },
      operationTimeoutMs: { ...millisecond(1000), description: 'Sample: an operation deadline.' },
      abandonTimeoutMs: { ...millisecond(5000), description: 'Sample: an abandon deadline.' },
      heartbeatIntervalMs: { ...millisecond(500), description: 'Sample: a heartbeat interval.' },
      shutdownDeadlineMs: { ...millisecond(10_000), description: 'Sample: a shutdown deadline.' },
    },
    rules: [
      {
        setting: 'abandonTimeoutMs',
        related: ['operationTimeoutMs'],
        rule: 'transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms',
        why: 'sample: a timed-out operation gets as long again.',
        holds: (transport) => transport.abandonTimeoutMs >= 2 * transport.operationTimeoutMs,
      },
      {
        setting: 'shutdownDeadlineMs',
        related: ['abandonTimeoutMs'],
        rule: 'transport.shutdown_deadline_ms ≥ transport.abandon_timeout_ms',
        why: 'sample: shutdown outlasts every abandon deadline.',
        holds: (transport) => transport.shutdownDeadlineMs >= transport.abandonTimeoutMs,
      },
    ],
  });

const sampleDiscoveryGroup = (define: typeof defineGroup) =>
  define('discovery', {
    description: 'Sample: a discovery store.',
    settings: {
      backend: { schema: z.enum(['memory', 'sqlite', 'etcd']), default: 'sqlite', description: 'Sample: the store.' },
      sqlitePath: { schema: z.string(), default: 'kvreuse-discovery.sqlite', description: 'Sample: a file.' },
      etcdEndpoints: {
        schema: z.array(z.url({ protocol: /^https?$/ })).min(1),
        default: ['http://127.0.0.1:2379'],
        description: 'Sample: a list.',
      },
      leaseTtlMs: {
        schema: z.int().min(1000).multipleOf(1000),
        default: 10_000,
        unit: 'ms',
        description: 'Sample: a lease.',
      },
    },
  });

const sampleFrontendGroup = (define: typeof defineGroup) =>
  define('frontend', {
    description: 'Sample: an HTTP front end.',
    settings: {
      rejectMediaStatusCode: {
        schema: z.int().min(400).max(599),
        default: 415,
        unit: 'HTTP status',
        description: 'Sample: a status code.',
      },
    },
  });

const sampleDrainGroup = (define: typeof defineGroup) =>
  define('drain', {
    description: 'Sample: a drain.',
    settings: {
      failedLoadPolicy: {
        schema: z.enum(['fail', 'recompute']),
        default: 'recompute',
        description: 'Sample: what a failed load does.',
      },
    },
  });

/** The sample groups, built with the `defineGroup` given. */
export function sampleGroups(define: typeof defineGroup) {
  return {
    routerGroup: sampleRouterGroup(define),
    transportGroup: sampleTransportGroup(define),
    discoveryGroup: sampleDiscoveryGroup(define),
    frontendGroup: sampleFrontendGroup(define),
    drainGroup: sampleDrainGroup(define),
  };
}

export const { routerGroup, transportGroup, discoveryGroup, frontendGroup, drainGroup } = sampleGroups(defineGroup);

/** Every sample group, composed as a process composing all of them would. */
export const allSampleGroups = [routerGroup, transportGroup, discoveryGroup, frontendGroup, drainGroup] as const;
