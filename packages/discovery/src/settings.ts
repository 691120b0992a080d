import { z } from 'zod';
import { defineGroup } from '@kvreuse/config';
import { maxLeaseTtlMs } from './common.js';

const MAX_PORT = 65_535;
const etcdEndpoint = z
  .string()
  .regex(/^https?:\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):[0-9]{1,5}$/, {
    message: 'expected http://host:port or https://host:port',
    abort: true,
  })
  .refine(
    (endpoint) => {
      const port = Number(endpoint.slice(endpoint.lastIndexOf(':') + 1));
      return port >= 1 && port <= MAX_PORT;
    },
    { message: `port must be from 1 to ${MAX_PORT}` },
  )
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
    sqliteFileMode: {
      schema: z.string().regex(/^0?[67][0-7]{2}$/, {
        message: 'expected octal permission bits that let the owner read and write, such as 0600',
      }),
      default: '0600',
      description:
        'The permission bits (octal) the `sqlite` backend creates its database file with, whatever the umask; ' +
        "SQLite gives the `-wal` and `-shm` files the same. The records name every worker's memory, so the " +
        'default lets only the owner read them; `0660` shares them with a group. A file that exists keeps its bits.',
    },
    etcdEndpoints: {
      schema: z.array(etcdEndpoint).min(1),
      default: ['http://127.0.0.1:2379'],
      description: 'The etcd cluster of the `etcd` backend: one or more `http(s)://host:port` endpoints.',
    },
    etcdCaFile: {
      schema: z.string(),
      default: '',
      description:
        "A PEM file of the certificate authority that signed the etcd servers' certificates, for `https://` " +
        'endpoints. Empty trusts the authorities Node.js trusts by default. A relative path resolves against ' +
        "the process's working directory.",
    },
    etcdCertFile: {
      schema: z.string(),
      default: '',
      description:
        'A PEM file of the client certificate this process presents to etcd (with `etcd_key_file`), for a ' +
        'cluster that requires client certificates. Empty presents none.',
    },
    etcdKeyFile: {
      schema: z.string(),
      default: '',
      description: 'The PEM file of the private key of `etcd_cert_file`; set with it, or not at all.',
    },
    etcdUsername: {
      schema: z.string(),
      default: '',
      description:
        'The etcd user this process authenticates as, on a cluster with authentication enabled (its password ' +
        'in `etcd_password_file`). Empty does not authenticate.',
    },
    etcdPasswordFile: {
      schema: z.string(),
      default: '',
      description:
        'A file whose content is the password of `etcd_username` (one trailing newline is ignored). A file, ' +
        'so that the password appears in no command line, environment or settings file; keep it readable by ' +
        'this process only.',
    },
    secretFile: {
      schema: z.string(),
      default: '',
      description:
        'The file holding the cluster secret that seals the transport metadata workers publish (AES-256-GCM) ' +
        'and authenticates their pin messages; a worker loads no peer whose metadata another secret sealed. At ' +
        'least 32 bytes, readable by its owner only (mode 0600); every process of the cluster names the same ' +
        'secret. Empty: the `sqlite` backend uses `<sqlite_path>.secret` beside its database, creating it (mode ' +
        '0600) when absent; the `memory` backend uses a random secret of this process; the `etcd` backend ' +
        'refuses to start, since the machines must share a secret that no default can create. A relative path ' +
        "resolves against the process's working directory.",
    },
    leaseTtlMs: {
      schema: z
        .int()
        .min(1000)
        .max(maxLeaseTtlMs, { message: `a lease TTL is at most ${maxLeaseTtlMs} ms (etcd's maximum, 9,000,000,000 s)` })
        .multipleOf(1000),
      default: 10_000,
      unit: 'ms',
      description:
        'How long a published descriptor or inventory entry lives without renewal; a crashed worker ' +
        'disappears after it. Whole seconds, because etcd leases are.',
    },
  },
  rules: [
    {
      setting: 'etcdKeyFile',
      related: ['etcdCertFile'],
      rule: 'discovery.etcd_cert_file and discovery.etcd_key_file are set together',
      why: 'a client certificate is presented with its private key; one without the other cannot be.',
      holds: (discovery) => (discovery.etcdCertFile === '') === (discovery.etcdKeyFile === ''),
    },
    {
      setting: 'etcdPasswordFile',
      related: ['etcdUsername'],
      rule: 'discovery.etcd_username and discovery.etcd_password_file are set together',
      why: 'etcd authenticates a user by its password; one without the other cannot authenticate.',
      holds: (discovery) => (discovery.etcdUsername === '') === (discovery.etcdPasswordFile === ''),
    },
    {
      setting: 'etcdEndpoints',
      related: ['etcdCaFile', 'etcdCertFile'],
      rule: 'discovery.etcd_endpoints are all https:// when discovery.etcd_ca_file or etcd_cert_file is set',
      why: 'certificates only take effect over TLS; an http:// endpoint would send everything in clear text.',
      holds: (discovery) =>
        (discovery.etcdCaFile === '' && discovery.etcdCertFile === '') ||
        discovery.etcdEndpoints.every((endpoint) => endpoint.startsWith('https://')),
    },
  ],
});
