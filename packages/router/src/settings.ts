import { z } from 'zod';
import { defineGroup } from '@kvreuse/config';

/** Decode→prefill reuse and its cost model: the settings of the router. */
export const routerGroup = defineGroup('router', {
  description:
    'Decode→prefill reuse: whether a prefill worker may pull the KV blocks a decode worker still retains ' +
    'instead of recomputing the prefix, and the cost model that decides when a pull is worth it.',
  settings: {
    enableDecodeToPrefillReuse: {
      schema: z.boolean(),
      default: false,
      description:
        'Let prefill workers pull retained KV blocks from decode workers instead of recomputing them. ' +
        'Off by default.',
    },
    enableDecodeToPrefillGpuReuse: {
      schema: z.boolean(),
      default: false,
      description:
        'Also pull blocks that decode workers retain in GPU memory. Requires ' +
        '`enable_decode_to_prefill_reuse`; a worker serves GPU reuse only once its declared deployment ' +
        'profile is admitted.',
    },
    minimumEstimatedTtftSavingMs: {
      schema: z.number().min(0),
      default: 5,
      unit: 'ms',
      description:
        'The margin a pull must win by: the estimated recompute time saved minus the estimated transfer ' +
        'time must be at least this much time-to-first-token.',
    },
    minimumTransferPrefixBlocks: {
      schema: z.int().min(1),
      default: 4,
      unit: 'blocks',
      description: 'The shortest retained prefix, beyond what the prefill worker already holds, that is worth pulling.',
    },
    transferSourceEstimatedBlockUs: {
      schema: z.number().positive(),
      default: 100,
      unit: 'µs per block',
      description: 'Estimated time to pull one block from a decode worker that retains it in host memory.',
    },
    transferSourceGpuEstimatedBlockUs: {
      schema: z.number().positive(),
      default: 40,
      unit: 'µs per block',
      description: 'Estimated time to pull one block from a decode worker that retains it in GPU memory.',
    },
    transferSourceLookupBudgetMs: {
      schema: z.number().min(0),
      default: 2,
      unit: 'ms',
      description:
        'How long the router may spend finding a transfer source in the retained inventory; past it, ' +
        'the prefill worker recomputes.',
    },
    transferSourcePrefillTokenUs: {
      schema: z.number().positive(),
      default: 50,
      unit: 'µs per token',
      description: 'Estimated prefill time per prompt token: what recomputing a prefix costs.',
    },
    maxConcurrentPullsPerSource: {
      schema: z.int().min(1),
      default: 4,
      unit: 'pulls',
      description:
        'How many pulls one decode worker may serve at once; the router skips a source already serving ' +
        'this many and looks for another or recomputes.',
    },
  },
  rules: [
    {
      setting: 'enableDecodeToPrefillGpuReuse',
      related: ['enableDecodeToPrefillReuse'],
      rule: 'router.enable_decode_to_prefill_gpu_reuse requires router.enable_decode_to_prefill_reuse',
      why: 'GPU reuse is a kind of reuse; turning it on alone would silently do nothing.',
      holds: (router) => !router.enableDecodeToPrefillGpuReuse || router.enableDecodeToPrefillReuse,
    },
  ],
});
