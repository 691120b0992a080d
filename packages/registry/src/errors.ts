// Typed errors of @kvreuse/registry. Every error carries a stable `code` and names the offending
// thing (key, lease, backend, worker, block) and the value that was refused.
import { describeValue as describe, KvreuseError } from '@kvreuse/errors';

export type DiscoveryBackend = 'memory' | 'sqlite' | 'etcd';

/** Every `code` a registry error carries. */
export type RegistryErrorCode =
  | 'DISCOVERY_INVALID_KEY'
  | 'DISCOVERY_INVALID_VALUE'
  | 'DISCOVERY_INVALID_ARGUMENT'
  | 'DISCOVERY_INVALID_SETTINGS'
  | 'DISCOVERY_LEASE_NOT_FOUND'
  | 'DISCOVERY_CLOSED'
  | 'DISCOVERY_UNAVAILABLE'
  | 'DISCOVERY_CREDENTIALS_FILE_UNREADABLE'
  | 'DISCOVERY_TLS_FAILED'
  | 'DISCOVERY_AUTHENTICATION_FAILED'
  | 'DISCOVERY_PERMISSION_DENIED'
  | 'INVENTORY_INVALID_BLOCK_INPUT'
  | 'INVENTORY_INVALID_EVENT'
  | 'INVENTORY_WITHDRAWN'
  | 'INVALID_BANK'
  | 'BANK_INVALID_TRANSITION'
  | 'BANK_ALREADY_REGISTERED'
  | 'BANK_ALREADY_RELEASED'
  | 'BANK_REINSTATE_REFUSED'
  | 'BANK_IN_USE'
  | 'BANK_REFERENCE_ALREADY_RELEASED'
  | 'BANK_OWNER_RELEASE_FAILED'
  | 'RANK_REGISTRATION_FAILED'
  | 'RANK_RELEASE_FAILED'
  | 'INVALID_RANK_BANKS'
  | 'RANK_PART_REFUSED'
  | 'RANK_PART_PUBLICATION_REFUSED'
  | 'CLUSTER_SECRET_REFUSED'
  | 'TRANSPORT_METADATA_REFUSED'
  | 'RANK_PART_WRONG_WORKER'
  | 'DISCOVERY_COMPARE_FAILED'
  | 'SUPERSEDED'
  | 'INVALID_REGISTRY_OPTION';

export abstract class RegistryError extends KvreuseError<RegistryErrorCode> {}

/** A key or prefix that discovery refuses: not a string, empty where a key is needed, or too long. */
export class DiscoveryKeyError extends RegistryError {
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
export class DiscoveryValueError extends RegistryError {
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
export class DiscoveryArgumentError extends RegistryError {
  readonly code = 'DISCOVERY_INVALID_ARGUMENT';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly argument: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`${backend} discovery: ${argument} = ${describe(value)} is refused: ${reason}`);
  }
}

/** `openDiscovery` was given settings that name no store; `setting` says which one and `value` what it held. */
export class DiscoverySettingsError extends RegistryError {
  readonly code = 'DISCOVERY_INVALID_SETTINGS';
  constructor(
    readonly setting: string,
    readonly value: unknown,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`discovery settings: ${setting} = ${describe(value)} is refused: ${reason}`, options);
  }
}

/** The lease does not exist (never granted, expired or revoked). */
export class DiscoveryLeaseError extends RegistryError {
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
export class DiscoveryCompareError extends RegistryError {
  readonly code = 'DISCOVERY_COMPARE_FAILED';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly key: string,
    readonly expected: number,
    readonly actual: number,
  ) {
    const at = (revision: number) => (revision === 0 ? 'absent' : `at revision ${revision}`);
    super(`${backend} discovery: commit refused: key ${describe(key)} was expected ${at(expected)} and is ${at(actual)}; nothing was written`);
  }
}

/** The store was closed; nothing more can be done with it. */
export class DiscoveryClosedError extends RegistryError {
  readonly code = 'DISCOVERY_CLOSED';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly operation: string,
  ) {
    super(`${backend} discovery: ${operation} after close`);
  }
}

/**
 * The backend could not be reached or failed (etcd down, SQLite file unusable). `location` is where
 * the store is, when the backend has one place (the SQLite file's absolute path).
 */
export class DiscoveryUnavailableError extends RegistryError {
  readonly code = 'DISCOVERY_UNAVAILABLE';
  readonly location: string | undefined;
  constructor(
    readonly backend: DiscoveryBackend,
    readonly operation: string,
    readonly key: string | undefined,
    options?: ErrorOptions & { readonly location?: string },
  ) {
    const cause = options?.cause instanceof Error ? `: ${options.cause.message}` : '';
    const at = options?.location === undefined ? '' : ` at ${options.location}`;
    super(
      `${backend} discovery${at}: ${operation}${key === undefined ? '' : ` of key ${describe(key)}`} failed${cause}`,
      options,
    );
    this.location = options?.location;
  }
}

/** A file a store was told to read (a certificate, a private key, a password) is missing, unreadable or empty. */
export class DiscoveryCredentialsFileError extends RegistryError {
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
export class DiscoveryTlsError extends RegistryError {
  readonly code = 'DISCOVERY_TLS_FAILED';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly operation: string,
    readonly endpoints: readonly string[],
    options?: ErrorOptions,
  ) {
    const cause = options?.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(`${backend} discovery: ${operation} failed: the TLS handshake with ${endpoints.join(', ')} failed${cause}`, options);
  }
}

/**
 * The backend refused to authenticate this process: a wrong user or password, or none given to a
 * cluster that requires one. `user` is the user it tried (undefined: none was configured).
 */
export class DiscoveryAuthenticationError extends RegistryError {
  readonly code = 'DISCOVERY_AUTHENTICATION_FAILED';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly operation: string,
    readonly user: string | undefined,
    options?: ErrorOptions,
  ) {
    const cause = options?.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(
      `${backend} discovery: ${operation} failed: ` +
        (user === undefined ? 'the server requires authentication and no user is configured' : `the server refused the credentials of user ${describe(user)}`) +
        cause,
      options,
    );
  }
}

/**
 * The backend denied this process's user an operation on a key (or prefix) it is not granted; a
 * commit so denied wrote nothing.
 */
export class DiscoveryPermissionError extends RegistryError {
  readonly code = 'DISCOVERY_PERMISSION_DENIED';
  constructor(
    readonly backend: DiscoveryBackend,
    readonly operation: string,
    readonly key: string | undefined,
    readonly user: string | undefined,
    options?: ErrorOptions,
  ) {
    const who = user === undefined ? 'this client (no etcd user configured: etcd took its client certificate\'s name, if any)' : `user ${describe(user)}`;
    super(`${backend} discovery: ${operation}${key === undefined ? '' : ` of key ${describe(key)}`} denied: ${who} is not granted it`, options);
  }
}

/**
 * A write that would store one worker's rank part under another worker's key, refused by the store
 * before anything of the put or commit was written.
 */
export class RankPartOwnerError extends RegistryError {
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

/** Token ids, a block size, a salt or its inputs that cannot be hashed into a block chain. */
export class BlockHashError extends RegistryError {
  readonly code = 'INVENTORY_INVALID_BLOCK_INPUT';
  constructor(
    readonly argument: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`block hash: ${argument} = ${describe(value)} is refused: ${reason}`);
  }
}

/** An inventory event or batch that is malformed; `path` says where. */
export class InventoryEventError extends RegistryError {
  readonly code = 'INVENTORY_INVALID_EVENT';
  constructor(
    readonly path: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`inventory event: ${path || '(root)'} = ${describe(value)} is refused: ${reason}`);
  }
}

/** An inventory publisher was asked to publish after `withdraw()`: a withdrawn worker announces nothing. */
export class InventoryWithdrawnError extends RegistryError {
  readonly code = 'INVENTORY_WITHDRAWN';
  constructor(
    readonly workerId: string,
    readonly incarnation: string,
  ) {
    super(`inventory of worker ${workerId} (incarnation ${incarnation}) was withdrawn; it publishes no further batch`);
  }
}

// ---- Banks, registration and readiness ----------------------------------------------------------

/** Names a bank in messages: its rank, index, address and size. */
export interface BankLabel {
  readonly tpRank: number;
  readonly ppRank: number;
  readonly index: number;
  readonly address: bigint;
  readonly bytes: bigint;
}

export function formatBank(bank: BankLabel): string {
  return `bank ${bank.index} of rank (tp ${bank.tpRank}, pp ${bank.ppRank}) at 0x${bank.address.toString(16)} (${bank.bytes} bytes)`;
}

/** A bank description or owner that cannot describe real memory; `field` says which part. */
export class InvalidBankError extends RegistryError {
  readonly code = 'INVALID_BANK';
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`bank: ${field} = ${describe(value)} is refused: ${reason}`);
  }
}

export type BankState = 'owned' | 'registering' | 'registered' | 'releasing' | 'returned' | 'retained';

/**
 * Why a bank is retained. `quarantine`: an operation that touches it was quarantined by the drain
 * layer; its registration is intact, and once nothing references it the bank may be reinstated.
 * `native-refusal`: the native layer refused a deregistration (or a rollback could not undo the
 * registration); what the memory's registration state is, is not known, so the bank may only be
 * released, never put back in service.
 */
export type BankRetainedBy = 'quarantine' | 'native-refusal';

/** A transition the bank's ownership state machine does not allow from its current state. */
export class BankStateError extends RegistryError {
  readonly code: 'BANK_INVALID_TRANSITION' | 'BANK_ALREADY_REGISTERED' | 'BANK_ALREADY_RELEASED' | 'BANK_REINSTATE_REFUSED' =
    'BANK_INVALID_TRANSITION';
  constructor(
    readonly bank: BankLabel,
    readonly state: BankState,
    readonly transition: string,
    detail?: string,
  ) {
    super(`${formatBank(bank)}: cannot ${transition} while ${state}${detail === undefined ? '' : `: ${detail}`}`);
  }
}

/** Registering a bank that is already registering, registered or retained. */
export class BankAlreadyRegisteredError extends BankStateError {
  override readonly code = 'BANK_ALREADY_REGISTERED';
}

/** Releasing a bank that is already releasing or returned. */
export class BankAlreadyReleasedError extends BankStateError {
  override readonly code = 'BANK_ALREADY_RELEASED';
}

/**
 * `reinstate()` refused: the bank is not retained (`not-retained`), was retained by a native refusal
 * (`native-refusal`: its registration state is unknown, it may only be released), or references
 * still hold it (`referenced`). Names the bank, its state, and why and by what it was retained.
 */
export class BankReinstateError extends BankStateError {
  override readonly code = 'BANK_REINSTATE_REFUSED';
  constructor(
    bank: BankLabel,
    state: BankState,
    readonly refusal: 'not-retained' | 'native-refusal' | 'referenced',
    readonly retainedBy: BankRetainedBy | undefined,
    readonly retainedReason: string | undefined,
    readonly references: number,
  ) {
    const why = {
      'not-retained': 'only a bank retained by a quarantine can be reinstated',
      'native-refusal': `it was retained by a native refusal (${retainedReason ?? 'no reason given'}), so its registration state is unknown; it can only be released`,
      referenced: `${references} reference(s) still hold it (retained by ${retainedBy ?? 'nothing'}: ${retainedReason ?? 'no reason given'})`,
    }[refusal];
    super(bank, state, 'reinstate', why);
  }
}

/** Releasing (or undoing the registration of) a bank that references still hold. */
export class BankInUseError extends RegistryError {
  readonly code = 'BANK_IN_USE';
  constructor(
    readonly bank: BankLabel,
    readonly references: number,
    readonly transition: string,
  ) {
    super(`${formatBank(bank)}: cannot ${transition} while ${references} reference(s) hold it`);
  }
}

/** A bank reference released a second time. */
export class BankReferenceReleasedError extends RegistryError {
  readonly code = 'BANK_REFERENCE_ALREADY_RELEASED';
  constructor(readonly bank: BankLabel) {
    super(`${formatBank(bank)}: this reference was already released`);
  }
}

/** The owner's release callback (or the native free of kvreuse-owned memory) failed; the bank stays releasing. */
export class BankOwnerReleaseError extends RegistryError {
  readonly code = 'BANK_OWNER_RELEASE_FAILED';
  constructor(
    readonly bank: BankLabel,
    readonly owner: 'framework' | 'kvreuse',
    options?: ErrorOptions,
  ) {
    const cause = options?.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(`${formatBank(bank)}: handing it back to ${owner === 'framework' ? 'the framework' : 'the native allocator'} failed${cause}; it stays releasing, retry`, options);
  }
}

/**
 * A bank that was not handed back, and what keeps it: `quarantine` (a live operation may touch it),
 * `native-refusal` (the native layer refused to deregister it; it is retained, never handed back) or
 * `owner-refusal` (deregistered, but its owner refused it back; it stays `releasing` and
 * `completeRelease()` retries).
 */
export interface RetainedBank {
  readonly bank: BankLabel;
  readonly retainedBy: BankRetainedBy | 'owner-refusal';
  /**
   * The code of the refusal when one was seen: the native status name (`BUSY`), or the error's
   * code (`BANK_IN_USE`, `BANK_OWNER_RELEASE_FAILED`) or name when it was not a native error.
   */
  readonly code?: string;
  /** Why, in words. */
  readonly reason: string;
}

/**
 * `registerRank` failed and rolled back. `bank` is the bank that failed (undefined when the call was
 * aborted or ran out of time between banks), `nativeCode` the native status name (`NOT_SUPPORTED`,
 * `INVALID_PARAM`, …), or kvreuse's own `ABORTED` / `DEADLINE` / `STATE_CHANGED` (a bank of the rank was
 * changed by someone else while the call waited between banks; `bank` names it, and it is left as they
 * left it); `rolledBack` lists the banks deregistered again, in the order it happened, and `retained`
 * the banks whose rollback failed.
 */
export class RankRegistrationError extends RegistryError {
  readonly code = 'RANK_REGISTRATION_FAILED';
  constructor(
    readonly rank: { readonly tpRank: number; readonly ppRank: number },
    readonly bank: BankLabel | undefined,
    readonly nativeCode: string,
    readonly detail: string,
    readonly rolledBack: readonly BankLabel[],
    readonly retained: readonly RetainedBank[],
    options?: ErrorOptions,
  ) {
    const where = bank === undefined ? `rank (tp ${rank.tpRank}, pp ${rank.ppRank})` : formatBank(bank);
    const undone =
      rolledBack.length === 0 ? 'nothing was registered, nothing rolled back' : `rolled back banks ${rolledBack.map((b) => b.index).join(', ')}`;
    const kept =
      retained.length === 0
        ? ''
        : `; rollback FAILED for ${retained.map((r) => `bank ${r.bank.index} (${r.reason})`).join(', ')}, retained`;
    super(`registering ${where} failed with ${nativeCode}${detail === '' ? '' : `: ${detail}`}; ${undone}${kept}`, options);
  }
}

/** `releaseRank` could not hand every bank back; `retained` stay quarantined, `unreturned` stay releasing. */
export class RankReleaseError extends RegistryError {
  readonly code = 'RANK_RELEASE_FAILED';
  constructor(
    readonly rank: { readonly tpRank: number; readonly ppRank: number },
    readonly retained: readonly RetainedBank[],
    readonly unreturned: readonly RetainedBank[],
  ) {
    const parts = [
      ...retained.map((r) => `bank ${r.bank.index} not deregistered (${r.reason}), retained`),
      ...unreturned.map((r) => `bank ${r.bank.index} deregistered but not handed back (${r.reason}), still releasing`),
    ];
    super(`releasing rank (tp ${rank.tpRank}, pp ${rank.ppRank}) was incomplete: ${parts.join('; ')}`);
  }
}

/** The banks given to `registerRank` / `releaseRank` do not form one rank (empty, mixed ranks, indices out of order). */
export class InvalidRankBanksError extends RegistryError {
  readonly code = 'INVALID_RANK_BANKS';
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`rank banks: ${field} = ${describe(value)} is refused: ${reason}`);
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
export class RankPartRefusedError extends RegistryError {
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
export class RankPartPublicationError extends RegistryError {
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
export class ClusterSecretError extends RegistryError {
  readonly code = 'CLUSTER_SECRET_REFUSED';
  readonly setting: string | undefined;
  constructor(
    readonly secret: string,
    readonly reason: string,
    options?: ErrorOptions & { readonly setting?: string },
  ) {
    super(`cluster secret ${options?.setting === undefined ? '' : `${options.setting} = `}${secret} ${reason}`, options);
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
export type TransportMetadataRefusal = 'unsigned' | 'truncated' | 'malformed' | 'outdated-format' | 'wrong-signature' | 'other-slot';

/** A peer's transport metadata that is not signed under this process's cluster secret; nothing of it was loaded. */
export class TransportMetadataRefusedError extends RegistryError {
  readonly code = 'TRANSPORT_METADATA_REFUSED';
  constructor(
    /** Whose metadata: the agent name the rank part states. */
    readonly agentName: string,
    readonly refusal: TransportMetadataRefusal,
    readonly reason: string,
  ) {
    super(`transport metadata of agent ${describe(agentName)} refused (${refusal}): ${reason}; no byte of it reached the transport`);
  }
}

/**
 * A worker incarnation was superseded: a newer incarnation of the same worker claimed a larger
 * epoch (`newerEpoch`, of incarnation `newerIncarnation`; undefined when the worker's epoch record
 * is gone). Nothing was written; the superseded incarnation must never publish again.
 */
export class SupersededError extends RegistryError {
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
    super(`worker ${describe(workerId)} incarnation ${describe(incarnation)}${own} is superseded (${newer}); ${operation} refused, and it must not publish again`);
  }
}

// ---- Options ------------------------------------------------------------------------------------

/** An option of a registry function or constructor that is missing or has the wrong shape; `option` names it. */
export class InvalidRegistryOptionError extends RegistryError {
  readonly code = 'INVALID_REGISTRY_OPTION';
  constructor(
    readonly option: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`${option} = ${describe(value)} is refused: ${rule}`);
  }
}
