import { z } from 'zod';
import { defineGroup } from '@kvreuse/config';

/** The HTTP front end. */
export const frontendGroup = defineGroup('frontend', {
  description: 'The HTTP front end that admits requests.',
  settings: {
    rejectMediaStatusCode: {
      schema: z.int().min(400).max(599),
      default: 415,
      unit: 'HTTP status',
      description: 'The status of the response that refuses a request carrying media input.',
    },
  },
});
