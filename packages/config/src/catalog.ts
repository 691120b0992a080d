import { z } from 'zod';

/** One setting, declared once; its file key, flag, variable, help and docs are derived from it. */
export interface SettingDeclaration<Schema extends z.ZodType = z.ZodType> {
  readonly schema: Schema;
  readonly default: z.output<Schema>;
  /** Absent for settings that are not quantities (switches, choices, paths). */
  readonly unit?: string;
  readonly description: string;
}

export interface GroupDeclaration {
  readonly description: string;
  readonly settings: Readonly<Record<string, SettingDeclaration>>;
}

function setting<Schema extends z.ZodType>(declaration: SettingDeclaration<Schema>): SettingDeclaration<Schema> {
  return declaration;
}

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

/**
 * Every kvreuse setting. Groups and names are camelCase here and in the resolved settings; the settings
 * file uses snake_case keys under group sections, flags `--<group>-<kebab-name>`, variables
 * `KVREUSE_<GROUP>_<UPPER_NAME>`. Group names are single words so that the derived names stay unambiguous.
 */
export const catalog = {
  router: {
    description:
      'Decode→prefill reuse: whether a prefill worker may pull the KV blocks a decode worker still retains ' +
      'instead of recomputing the prefix, and the cost model that decides when a pull is worth it.',
    settings: {
      enableDecodeToPrefillReuse: setting({
        schema: z.boolean(),
        default: false,
        description:
          'Let prefill workers pull retained KV blocks from decode workers instead of recomputing them. ' +
          'Off by default.',
      }),
      enableDecodeToPrefillGpuReuse: setting({
        schema: z.boolean(),
        default: false,
        description:
          'Also pull blocks that decode workers retain in GPU memory. Requires ' +
          '`enable_decode_to_prefill_reuse`; a worker serves GPU reuse only once its declared deployment ' +
          'profile is admitted.',
      }),
      minimumEstimatedTtftSavingMs: setting({
        schema: z.number().min(0),
        default: 5,
        unit: 'ms',
        description:
          'The margin a pull must win by: the estimated recompute time saved minus the estimated transfer ' +
          'time must be at least this much time-to-first-token.',
      }),
      minimumTransferPrefixBlocks: setting({
        schema: z.int().min(1),
        default: 4,
        unit: 'blocks',
        description:
          "The shortest retained prefix, beyond what the prefill worker already holds, that is worth pulling.",
      }),
      transferSourceEstimatedBlockUs: setting({
        schema: z.number().positive(),
        default: 100,
        unit: 'µs per block',
        description: 'Estimated time to pull one block from a decode worker that retains it in host memory.',
      }),
      transferSourceGpuEstimatedBlockUs: setting({
        schema: z.number().positive(),
        default: 40,
        unit: 'µs per block',
        description: 'Estimated time to pull one block from a decode worker that retains it in GPU memory.',
      }),
      transferSourceLookupBudgetMs: setting({
        schema: z.number().min(0),
        default: 2,
        unit: 'ms',
        description:
          'How long the router may spend finding a transfer source in the retained inventory; past it, ' +
          'the prefill worker recomputes.',
      }),
      transferSourcePrefillTokenUs: setting({
        schema: z.number().positive(),
        default: 50,
        unit: 'µs per token',
        description: 'Estimated prefill time per prompt token: what recomputing a prefix costs.',
      }),
    },
  },
  transport: {
    description: 'The native transport that moves KV blocks between workers, and its deadlines.',
    settings: {
      backend: setting({
        schema: z.enum(['ucx', 'loopback']),
        default: 'ucx',
        description:
          '`ucx` moves bytes through UCX (shared memory, TCP or RDMA, whatever the machine offers); ' +
          '`loopback` moves them inside one process, for tests and single-process demos.',
      }),
      library: setting({
        schema: z.string(),
        default: '',
        description:
          'Path of the native transport library (libkvreuse_transport) to load; empty loads the one ' +
          '`@kvreuse/native-bindings` finds by default.',
      }),
      operationTimeoutMs: setting({
        schema: z.int().positive(),
        default: 1000,
        unit: 'ms',
        description:
          'A transfer not complete by then fails its request, which recomputes instead. The operation keeps ' +
          'its memory until it is quiescent.',
      }),
      abandonTimeoutMs: setting({
        schema: z.int().positive(),
        default: 5000,
        unit: 'ms',
        description:
          'A transfer still not terminal this long after it was posted is abandoned: quarantined, its banks ' +
          'retained until the native layer proves it terminal or the process exits. At least twice ' +
          '`operation_timeout_ms`.',
      }),
      heartbeatIntervalMs: setting({
        schema: z.int().min(10).max(60_000),
        default: 500,
        unit: 'ms',
        description:
          'How often the native transport probes each peer that has transfers in flight or holds pins; the ' +
          "peer's progress thread answers. Catches a peer that is stopped or hung, which the transport's own " +
          'keepalive misses over tcp.',
      }),
      heartbeatMisses: setting({
        schema: z.int().min(1).max(1000),
        default: 3,
        unit: 'intervals',
        description:
          'A peer that answers no probe for this many `heartbeat_interval_ms` in a row is reported unresponsive, ' +
          'so that its transfers can be cancelled and it can be routed around; it is reported responsive again ' +
          'once it answers.',
      }),
      shutdownDeadlineMs: setting({
        schema: z.int().positive(),
        default: 10_000,
        unit: 'ms',
        description:
          'How long shutdown waits for in-flight transfers to become quiescent before it reports the rest ' +
          'as quarantined and completes. At least `abandon_timeout_ms`, so that every transfer reaches its ' +
          'abandon deadline before shutdown gives up on it.',
      }),
    },
  },
  discovery: {
    description: 'Where workers publish their rank descriptors and retained inventory, and find each other.',
    settings: {
      backend: setting({
        schema: z.enum(['memory', 'sqlite', 'etcd']),
        default: 'sqlite',
        description:
          '`memory` serves one process; `sqlite` the processes of one machine, through one database file; ' +
          '`etcd` many machines.',
      }),
      sqlitePath: setting({
        schema: z.string().min(1),
        default: 'kvreuse-discovery.sqlite',
        description:
          'The SQLite database file of the `sqlite` backend, shared by every process on the machine. A ' +
          "relative path resolves against the process's working directory.",
      }),
      etcdEndpoints: setting({
        schema: z.array(etcdEndpoint).min(1),
        default: ['http://127.0.0.1:2379'],
        description: 'The etcd cluster of the `etcd` backend: one or more `http(s)://host:port` endpoints.',
      }),
      leaseTtlMs: setting({
        schema: z.int().min(1000).multipleOf(1000),
        default: 10_000,
        unit: 'ms',
        description:
          'How long a published descriptor or inventory entry lives without renewal; a crashed worker ' +
          'disappears after it. Whole seconds, because etcd leases are.',
      }),
    },
  },
  frontend: {
    description: 'The HTTP front end that admits requests.',
    settings: {
      rejectMediaStatusCode: setting({
        schema: z.int().min(400).max(599),
        default: 415,
        unit: 'HTTP status',
        description: 'The status of the response that refuses a request carrying media input.',
      }),
    },
  },
  drain: {
    description: 'The drain layer: operations, quiescence, and what a request does when its pulled blocks fail to load.',
    settings: {
      failedLoadPolicy: setting({
        schema: z.enum(['fail', 'recompute']),
        default: 'recompute',
        description:
          'When loading pulled blocks fails: `recompute` computes the prefix locally and the request ' +
          'succeeds; `fail` fails the request.',
      }),
    },
  },
  inventory: {
    description: 'The retained inventory: how decode workers and routers name the KV blocks a worker retains.',
    settings: {
      hashSeed: setting({
        schema: z
          .string()
          .regex(/^[!-~]{0,128}$/, { message: 'at most 128 printable ASCII characters, without spaces' })
          .meta({ description: 'up to 128 printable ASCII characters' }),
        default: '',
        description:
          "Salts every block hash, together with the model's geometry digest, so that two models never share " +
          'hashes. Models of different KV geometry differ already; give models that share a geometry (a ' +
          'fine-tune of the same base, two revisions) different seeds, e.g. the model name and revision. ' +
          'Every worker and router of one model must use the same seed.',
      }),
    },
  },
  profile: {
    description:
      'The deployment profile this process declares (see `@kvreuse/profile-admission`): GPU reuse activates ' +
      'only once a declared profile is admitted against the running facts.',
    settings: {
      name: setting({
        schema: z
          .string()
          .regex(/^([a-z0-9][a-z0-9._-]{0,127})?$/, { message: 'a profile name: up to 128 of a-z, 0-9, ".", "_" and "-"' })
          .meta({ description: 'a profile name, or empty' }),
        default: '',
        description: 'A built-in deployment profile to declare, by name (`qwen3-0.6b-bf16-b64`, …). Empty declares none.',
      }),
      file: setting({
        schema: z.string(),
        default: '',
        description:
          'A JSON file holding the deployment profile to declare. Empty declares none. A relative path resolves ' +
          "against the process's working directory.",
      }),
    },
  },
} as const satisfies Readonly<Record<string, GroupDeclaration>>;

type Catalog = typeof catalog;

export type GroupName = keyof Catalog;

type SettingNameOf<Group extends GroupName> = keyof Catalog[Group]['settings'] & string;

/** A setting's name in code: `router.minimumTransferPrefixBlocks`. */
export type SettingPath = { [Group in GroupName]: `${Group}.${SettingNameOf<Group>}` }[GroupName];

type ValueOf<Declaration> = Declaration extends SettingDeclaration<infer Schema> ? z.output<Schema> : never;

type Frozen<Value> = Value extends readonly (infer Item)[] ? readonly Item[] : Value;

/** The resolved settings: grouped, camelCase, frozen. */
export type Settings = {
  readonly [Group in GroupName]: {
    readonly [Name in SettingNameOf<Group>]: Frozen<ValueOf<Catalog[Group]['settings'][Name]>>;
  };
};

/** A rule between settings, checked after the sources are merged. */
export interface CrossFieldRule {
  /** The setting the rule constrains; an error names it. */
  readonly setting: SettingPath;
  /** The settings it is compared with. */
  readonly related: readonly SettingPath[];
  readonly rule: string;
  /** Why the rule exists, for the docs. */
  readonly why: string;
  readonly holds: (settings: Settings) => boolean;
}

export const crossFieldRules: readonly CrossFieldRule[] = [
  {
    setting: 'router.enableDecodeToPrefillGpuReuse',
    related: ['router.enableDecodeToPrefillReuse'],
    rule: 'router.enable_decode_to_prefill_gpu_reuse requires router.enable_decode_to_prefill_reuse',
    why: 'GPU reuse is a kind of reuse; turning it on alone would silently do nothing.',
    holds: ({ router }) => !router.enableDecodeToPrefillGpuReuse || router.enableDecodeToPrefillReuse,
  },
  {
    setting: 'profile.file',
    related: ['profile.name'],
    rule: 'profile.file and profile.name are not both set',
    why: 'a process declares one deployment profile; two would leave which one is admitted ambiguous.',
    holds: ({ profile }) => profile.file === '' || profile.name === '',
  },
  {
    setting: 'transport.abandonTimeoutMs',
    related: ['transport.operationTimeoutMs'],
    rule: 'transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms',
    why: 'a transfer that timed out gets at least as long again to become terminal before it is quarantined.',
    holds: ({ transport }) => transport.abandonTimeoutMs >= 2 * transport.operationTimeoutMs,
  },
  {
    setting: 'transport.shutdownDeadlineMs',
    related: ['transport.abandonTimeoutMs'],
    rule: 'transport.shutdown_deadline_ms ≥ transport.abandon_timeout_ms',
    why: 'every in-flight transfer reaches its abandon deadline before shutdown gives up on it.',
    holds: ({ transport }) => transport.shutdownDeadlineMs >= transport.abandonTimeoutMs,
  },
];
