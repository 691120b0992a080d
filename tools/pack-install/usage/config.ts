import { defineGroup, defineSettings } from '@kvreuse/config';
import { z } from 'zod';

// A group of a service's own, as each kvreuse package declares its own; an environment and a command line
// of its own, so that nothing of this process's leaks in.
const cacheGroup = defineGroup('cache', {
  description: 'A cache in front of the service.',
  settings: {
    backend: { schema: z.enum(['memory', 'disk']), default: 'disk', description: 'Where the cache keeps entries.' },
    flushIntervalMs: { schema: z.int().positive(), default: 1000, unit: 'ms', description: 'How often it flushes.' },
  },
});
const { settings, provenance } = defineSettings([cacheGroup]).resolve({
  env: { KVREUSE_CACHE_BACKEND: 'memory' },
  argv: ['--cache-flush-interval-ms', '250'],
});
console.log(
  JSON.stringify({
    backend: [settings.cache.backend, provenance.cache.backend.source],
    flushIntervalMs: [settings.cache.flushIntervalMs, provenance.cache.flushIntervalMs.source],
  }),
);
