// Typed errors of @kvreuse/discovery. Every error carries a stable `code` and names the offending
// thing (key, lease, backend, worker, rank part) and the value that was refused.
import { causeSuffix, describeValue as describe, KvreuseError, redactValue } from '@kvreuse/errors';
import type { DiscoveryBackend } from './backend.js';

/** Every `code` a discovery error carries. */
export type DiscoveryErrorCode =
  | 'DISCOVERY_INVALID_KEY'
  | 'DISCOVERY_INVALID_VALUE'
  | 'DISCOVERY_INVALID_ARGUMENT'
  | 'DISCOVERY_INVALID_SETTINGS'
  | 'DISCOVERY_LEASE_NOT_FOUND'
  | 'DISCOVERY_COMPARE_FAILED'
  | 'DISCOVERY_CLOSED'
  | 'DISCOVERY_UNAVAILABLE'
  | 'DISCOVERY_FILE_INVALID'
  | 'DISCOVERY_FILE_TOO_NEW'
  | 'DISCOVERY_CREDENTIALS_FILE_UNREADABLE'
  | 'DISCOVERY_TLS_FAILED'
  | 'DISCOVERY_AUTHENTICATION_FAILED'
  | 'DISCOVERY_PERMISSION_DENIED'
  | 'RANK_PART_WRONG_WORKER'
  | 'RANK_PART_REFUSED'
  | 'RANK_PART_PUBLICATION_REFUSED'
  | 'CLUSTER_SECRET_REFUSED'
  | 'TRANSPORT_METADATA_REFUSED'
  | 'SUPERSEDED'
  | 'DISCOVERY_DRIVER_MISSING'
  | 'INVALID_DISCOVERY_OPTION';

export abstract class DiscoveryError extends KvreuseError<DiscoveryErrorCode> {}

/** A key or prefix that discovery refuses: not a string, empty where a key is needed, or too long. */
export class DiscoveryKeyError extends DiscoveryError {
  readonly code = 'DISCOVERY_INVALID_KEY';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly key: unknown,
    readonly reason: string,
  ) {
    super(`${backend} discovery: key ${describe(key)} is refused: ${reason}`);
  }
}

/** A value that is neither a string nor bytes, or stored bytes that are not the text a reader asked for. */
export class DiscoveryValueError extends DiscoveryError {
  readonly code = 'DISCOVERY_INVALID_VALUE';
  constructor(
    readonly backend: DiscoveryBackend | undefined,
    readonly key: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`${backend ?? 'discovery'}: value ${describe(value)} of key ${describe(key)} is refused: ${reason}`);
  }
}

/** An argument of a discovery call that is out of range (a lease TTL, a revision, an operation). */
export class DiscoveryArgumentError extends DiscoveryError {
  readonly code = 'DISCOVERY_INVALID_ARGUMENT';
  /** The refused value, any URL's credentials in it replaced by `***`. */
  readonly value: unknown;
  constructor(
    readonly backend: DiscoveryBackend,
    readonly argument: string,
    value: unknown,
    readonly reason: string,
  ) {
    super(`${backend} discovery: ${argument} = ${describe(value)} is refused: ${reason}`);
    this.value = redactValue(value);
  }
}

/** `openDiscovery` was given settings that name no store; `setting` says which one and `value` what it held. */
export class DiscoverySettingsError extends DiscoveryError {
  readonly code = 'DISCOVERY_INVALID_SETTINGS';
  /** The refused value, any URL's credentials in it replaced by `***`. */
  readonly value: unknown;
  constructor(
    readonly setting: string,
    value: unknown,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`discovery settings: ${setting} = ${describe(value)} is refused: ${reason}`, options);
    this.value = redactValue(value);
  }
}

/** The lease does not exist (never granted, expired or revoked). */
export class DiscoveryLeaseError extends DiscoveryError {
  readonly code = 'DISCOVERY_LEASE_NOT_FOUND';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly lease: string,
    readonly key?: string,
  ) {
    super(
      `${backend} discovery: lease ${lease} does not exist (expired, revoked or never granted)` +
        (key === undefined ? '' : `; refused to put key ${describe(key)} under it`),
    );
  }
}

/**
 * A conditional commit was not applied: `key` was expected at modification revision `expected`
 * (0 = absent) and is at `actual` now. Nothing of the commit was written.
 */
export class DiscoveryCompareError extends DiscoveryError {
  readonly code = 'DISCOVERY_COMPARE_FAILED';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly key: string,
    readonly expected: number,
    readonly actual: number,
  ) {
    const at = (revision: number) => (revision === 0 ? 'absent' : `at revision ${revision}`);
    super(
      `${backend} discovery: commit refused: key ${describe(key)} was expected ${at(expected)} and is ${at(actual)}; nothing was written`,
    );
  }
}

/** The store was closed; nothing more can be done with it. */
export class DiscoveryClosedError extends DiscoveryError {
  readonly code = 'DISCOVERY_CLOSED';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly operation: string,
  ) {
    super(`${backend} discovery: ${operation} after close`);
  }
}

/**
 * The SQLite discovery file holds no discovery database: it is not a SQLite database, or it is the database of
 * something else (tables of its own). Nothing in it was changed.
 */
export class DiscoveryFileError extends DiscoveryError {
  readonly code = 'DISCOVERY_FILE_INVALID';
  readonly backend = 'sqlite';
  constructor(
    readonly location: string,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`sqlite discovery at ${location}: ${reason}; nothing in it was changed`, options);
  }
}

/**
 * The SQLite discovery file was written by a newer version of @kvreuse/discovery: it records schema version
 * `version`, above `knownVersion`, the newest this version knows. Nothing in it was changed.
 */
export class DiscoveryFileVersionError extends DiscoveryError {
  readonly code = 'DISCOVERY_FILE_TOO_NEW';
  readonly backend = 'sqlite';
  constructor(
    readonly location: string,
    readonly version: number,
    readonly knownVersion: number,
  ) {
    super(
      `sqlite discovery at ${location}: the file records schema version ${version}, newer than version ${knownVersion}, ` +
        `the newest this version of @kvreuse/discovery knows: open it with a newer one; nothing in it was changed`,
    );
  }
}

/** A store's operations whose subject is a prefix (every other one's is a key): `list` and `watch`. */
const prefixOperations: ReadonlySet<string> = new Set(['list', 'watch']);

/** `get of key "/a"`, `watch of prefix "/a/"`, or the operation alone when it has no key. */
function operationOn(operation: string, key: string | undefined): string {
  if (key === undefined) return operation;
  return `${operation} of ${prefixOperations.has(operation) ? 'prefix' : 'key'} ${describe(key)}`;
}

/**
 * The backend could not be reached or failed (etcd down, SQLite file unusable). `location` is where
 * the store is, when the backend has one place (the SQLite file's absolute path); `why`, when given,
 * says what went wrong in words in place of the cause's own message. `key` is the key the operation
 * was on, or the prefix of a `list` or `watch`.
 */
export class DiscoveryUnavailableError extends DiscoveryError {
  readonly code = 'DISCOVERY_UNAVAILABLE';
  readonly location: string | undefined;
  constructor(
    readonly backend: DiscoveryBackend,
    readonly operation: string,
    readonly key: string | undefined,
    options?: ErrorOptions & { readonly location?: string; readonly why?: string },
  ) {
    const cause = options?.why !== undefined ? `: ${options.why}` : causeSuffix(options?.cause);
    const at = options?.location === undefined ? '' : ` at ${options.location}`;
    super(`${backend} discovery${at}: ${operationOn(operation, key)} failed${cause}`, options);
    this.location = options?.location;
  }
}

/**
 * A SQLite store's operation that waited `busyTimeoutMs` for the file's write lock while another writer (another
 * store on the file, most often in another process) held it all that time: nothing of the operation was written.
 * Retried once that writer lets go, or with a longer `busyTimeoutMs`, it goes through. A `DiscoveryUnavailableError`
 * of its own kind, with the file's `location`.
 */
export class DiscoveryLockHeldError extends DiscoveryUnavailableError {
  declare readonly location: string;
  constructor(
    operation: string,
    key: string | undefined,
    location: string,
    readonly busyTimeoutMs: number,
    options?: ErrorOptions,
  ) {
    super('sqlite', operation, key, {
      ...options,
      location,
      why: `another writer held the file's write lock for longer than busyTimeoutMs (${busyTimeoutMs} ms); nothing was written`,
    });
  }
}

/** A file a store was told to read (a certificate, a private key, a password) is missing, unreadable or empty. */
export class DiscoveryCredentialsFileError extends DiscoveryError {
  readonly code = 'DISCOVERY_CREDENTIALS_FILE_UNREADABLE';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly option: string,
    readonly path: string,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`${backend} discovery: ${option} ${describe(path)} cannot be used: ${reason}`, options);
  }
}

/**
 * The TLS handshake with the backend failed: this process does not trust the server's certificate
 * (wrong `caFile`), or the server refused this process's client certificate (none, or one its
 * authority did not sign). Retrying does not help; the certificate files must change.
 */
export class DiscoveryTlsError extends DiscoveryError {
  readonly code = 'DISCOVERY_TLS_FAILED';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly operation: string,
    readonly endpoints: readonly string[],
    options?: ErrorOptions,
  ) {
    const cause = causeSuffix(options?.cause);
    super(
      `${backend} discovery: ${operation} failed: the TLS handshake with ${endpoints.join(', ')} failed${cause}`,
      options,
    );
  }
}

/**
 * The backend refused to authenticate this process: a wrong user or password, or none given to a
 * cluster that requires one. `user` is the user it tried (undefined: none was configured).
 */
export class DiscoveryAuthenticationError extends DiscoveryError {
  readonly code = 'DISCOVERY_AUTHENTICATION_FAILED';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly operation: string,
    readonly user: string | undefined,
    options?: ErrorOptions,
  ) {
    const cause = causeSuffix(options?.cause);
    super(
      `${backend} discovery: ${operation} failed: ` +
        (user === undefined
          ? 'the server requires authentication and no user is configured'
          : `the server refused the credentials of user ${describe(user)}`) +
        cause,
      options,
    );
  }
}

/**
 * The backend denied this process's user an operation on a key (or prefix) it is not granted; a
 * commit so denied wrote nothing.
 */
export class DiscoveryPermissionError extends DiscoveryError {
  readonly code = 'DISCOVERY_PERMISSION_DENIED';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly operation: string,
    readonly key: string | undefined,
    readonly user: string | undefined,
    options?: ErrorOptions,
  ) {
    const who =
      user === undefined
        ? "this client (no etcd user configured: etcd took its client certificate's name, if any)"
        : `user ${describe(user)}`;
    super(`${backend} discovery: ${operationOn(operation, key)} denied: ${who} is not granted it`, options);
  }
}

/**
 * A write that would store one worker's rank part under another worker's key, refused by the store
 * before anything of the put or commit was written.
 */
export class RankPartOwnerError extends DiscoveryError {
  readonly code = 'RANK_PART_WRONG_WORKER';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly key: string,
    readonly keyWorkerId: string,
    readonly partWorkerId: unknown,
  ) {
    super(
      `${backend} discovery: refused to write the rank part of worker ${describe(partWorkerId)} at ${describe(key)}, ` +
        `a key of worker ${describe(keyWorkerId)}: a rank part is written only under its own worker's key; nothing was written`,
    );
  }
}

export type RankPartRefusal = 'malformed' | 'wrong-version' | 'tampered' | 'misplaced';

/**
 * A rank part read from discovery that is refused: `malformed` (not a rank-part record, or its part
 * fails the descriptors schema), `wrong-version` (a record or part version this reader does not
 * know), `tampered` (the checksum does not match the epoch and part, or the bytes are not those its
 * writer encoded) or `misplaced` (stored under another worker's or rank's key). A refused part never
 * contributes to readiness.
 */
export class RankPartRefusedError extends DiscoveryError {
  readonly code = 'RANK_PART_REFUSED';
  constructor(
    readonly key: string,
    readonly refusal: RankPartRefusal,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`rank part at ${describe(key)} refused (${refusal}): ${reason}`, options);
  }
}

/** Rank parts that cannot be published together (no parts, mixed workers or incarnations, a worker id unfit for a key). */
export class RankPartPublicationError extends DiscoveryError {
  readonly code = 'RANK_PART_PUBLICATION_REFUSED';
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`publishing rank parts: ${field} = ${describe(value)} is refused: ${reason}`);
  }
}

/**
 * The cluster secret cannot be used: `secret` is the secret file's absolute path (missing, not a
 * regular file, open to its group or others, too short or too long) or the setting that fails to name
 * one (`discovery.secret_file`). `setting` is the setting that named the file, when one did.
 */
export class ClusterSecretError extends DiscoveryError {
  readonly code = 'CLUSTER_SECRET_REFUSED';
  readonly setting: string | undefined;
  constructor(
    readonly secret: string,
    readonly reason: string,
    options?: ErrorOptions & { readonly setting?: string },
  ) {
    super(
      `cluster secret ${options?.setting === undefined ? '' : `${options.setting} = `}${secret} ${reason}`,
      options,
    );
    this.setting = options?.setting;
  }
}

/**
 * Why a peer's transport metadata was refused before it reached the native layer: `unsigned` (a bare
 * metadata blob, without signature), `truncated` (shorter than its signature header), `malformed`
 * (not a signed metadata envelope this reader knows), `outdated-format` (signed in envelope version 1,
 * whose signature does not cover the rank part it is published in), `wrong-signature` (signed with
 * another cluster secret, or altered after signing) or `other-slot` (validly signed, but for another
 * worker, incarnation, rank or agent than the rank part it is published in: a replayed blob).
 */
export type TransportMetadataRefusal =
  'unsigned' | 'truncated' | 'malformed' | 'outdated-format' | 'wrong-signature' | 'other-slot';

/** A peer's transport metadata that is not signed under this process's cluster secret; nothing of it was loaded. */
export class TransportMetadataRefusedError extends DiscoveryError {
  readonly code = 'TRANSPORT_METADATA_REFUSED';
  constructor(
    /** Whose metadata: the agent name the rank part states. */
    readonly agentName: string,
    readonly refusal: TransportMetadataRefusal,
    readonly reason: string,
  ) {
    super(
      `transport metadata of agent ${describe(agentName)} refused (${refusal}): ${reason}; no byte of it reached the transport`,
    );
  }
}

/**
 * A worker incarnation was superseded: a newer incarnation of the same worker claimed a larger
 * epoch (`newerEpoch`, of incarnation `newerIncarnation`; undefined when the worker's epoch record
 * is gone). Nothing was written; the superseded incarnation must never publish again.
 */
export class SupersededError extends DiscoveryError {
  readonly code = 'SUPERSEDED';
  constructor(
    readonly workerId: string,
    readonly incarnation: string,
    readonly epoch: number | undefined,
    readonly newerEpoch: number | undefined,
    readonly newerIncarnation: string | undefined,
    readonly operation: string,
  ) {
    const own = epoch === undefined ? '' : ` (epoch ${epoch})`;
    const newer =
      newerEpoch === undefined
        ? "the worker's epoch record is gone"
        : `incarnation ${describe(newerIncarnation)} holds epoch ${newerEpoch}`;
    super(
      `worker ${describe(workerId)} incarnation ${describe(incarnation)}${own} is superseded (${newer}); ${operation} refused, and it must not publish again`,
    );
  }
}

/**
 * The driver of a store's backend is not installed: `better-sqlite3` for SQLite, `etcd3` for etcd. They
 * are optional peer dependencies of @kvreuse/discovery; install the one `driver` names next to it.
 */
export class DiscoveryDriverMissingError extends DiscoveryError {
  readonly code = 'DISCOVERY_DRIVER_MISSING';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly driver: string,
    options?: ErrorOptions,
  ) {
    super(
      `${backend} discovery needs the package ${driver}, which is not installed: install it next to @kvreuse/discovery (npm install ${driver})`,
      options,
    );
  }
}

/** An option of a discovery or readiness function or constructor that is missing or has the wrong shape; `option` names it. */
export class InvalidDiscoveryOptionError extends DiscoveryError {
  readonly code = 'INVALID_DISCOVERY_OPTION';
  constructor(
    readonly option: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`${option} = ${describe(value)} is refused: ${rule}`);
  }
}
