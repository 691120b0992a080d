import { z } from 'zod';
import { defineGroup } from '@kvreuse/config';

/** The drain layer. */
export const drainGroup = defineGroup('drain', {
  description: 'The drain layer: operations, quiescence, and what a request does when its pulled blocks fail to load.',
  settings: {
    failedLoadPolicy: {
      schema: z.enum(['fail', 'recompute']),
      default: 'recompute',
      description:
        'When loading pulled blocks fails: `recompute` computes the prefix locally and the request ' +
        'succeeds; `fail` fails the request.',
    },
  },
});
