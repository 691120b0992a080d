import { z } from 'zod';
import { defineGroup } from '../group.js';

const MAX_PORT = 65_535;
const etcdEndpoint = z
  .string()
  .regex(/^https?:\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):[0-9]{1,5}$/, {
    message: 'expected http://host:port or https://host:port',
  })
  .refine((endpoint) => Number(endpoint.slice(endpoint.lastIndexOf(':') + 1)) <= MAX_PORT, {
    message: `port must be at most ${MAX_PORT}`,
  })
  .meta({ description: 'http://host:port or https://host:port' });

/** Where workers publish their descriptors and inventory. */
export const discoveryGroup = defineGroup('discovery', {
  description: 'Where workers publish their rank descriptors and retained inventory, and find each other.',
  settings: {
    backend: {
      schema: z.enum(['memory', 'sqlite', 'etcd']),
      default: 'sqlite',
      description:
        '`memory` serves one process; `sqlite` the processes of one machine, through one database file; ' +
        '`etcd` many machines.',
    },
    sqlitePath: {
      schema: z.string().min(1),
      default: 'kvreuse-discovery.sqlite',
      description:
        'The SQLite database file of the `sqlite` backend, shared by every process on the machine. A ' +
        "relative path resolves against the process's working directory.",
    },
    etcdEndpoints: {
      schema: z.array(etcdEndpoint).min(1),
      default: ['http://127.0.0.1:2379'],
      description: 'The etcd cluster of the `etcd` backend: one or more `http(s)://host:port` endpoints.',
    },
    leaseTtlMs: {
      schema: z.int().min(1000).multipleOf(1000),
      default: 10_000,
      unit: 'ms',
      description:
        'How long a published descriptor or inventory entry lives without renewal; a crashed worker ' +
        'disappears after it. Whole seconds, because etcd leases are.',
    },
  },
});
