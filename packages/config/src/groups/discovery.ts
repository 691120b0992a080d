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
    secretFile: {
      schema: z.string(),
      default: '',
      description:
        'The file holding the cluster secret that signs the transport metadata workers publish (HMAC-SHA256); ' +
        'a worker loads no peer whose metadata another secret signed. At least 32 bytes, readable by its owner ' +
        'only (mode 0600); every process of the cluster names the same secret. Empty: the `sqlite` backend uses ' +
        '`<sqlite_path>.secret` beside its database, creating it (mode 0600) when absent; the `memory` backend ' +
        'signs with a random secret of this process; the `etcd` backend refuses to start, since the machines ' +
        'must share a secret that no default can create. A relative path resolves against the process\'s working ' +
        'directory.',
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
