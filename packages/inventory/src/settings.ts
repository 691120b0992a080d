import { z } from 'zod';
import { defineGroup } from '@kvreuse/config';

/** How the retained inventory names blocks. */
export const inventoryGroup = defineGroup('inventory', {
  description: 'The retained inventory: how decode workers and routers name the KV blocks a worker retains.',
  settings: {
    hashSeed: {
      schema: z
        .string()
        .regex(/^[!-~]{0,128}$/, { message: 'at most 128 printable ASCII characters, without spaces' })
        .meta({ description: 'up to 128 printable ASCII characters' }),
      default: '',
      description:
        "Salts every block hash, together with the model's KV content facts (layers, planes, tokens per block, " +
        'KV heads, head dim, dtype; not the bank layout), so that two models never share hashes. Models whose ' +
        'facts differ differ already; give models that share them (a fine-tune of the same base, two ' +
        'revisions) different seeds, e.g. the model name and revision. ' +
        'Every worker and router of one model must use the same seed.',
    },
  },
});
