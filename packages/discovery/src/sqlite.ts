import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import type Database from 'better-sqlite3';
import {
  DiscoveryArgumentError,
  DiscoveryClosedError,
  DiscoveryLeaseError,
  DiscoveryUnavailableError,
  DiscoveryError,
  DiscoveryFileError,
  DiscoveryFileVersionError,
  DiscoveryLockHeldError,
} from './errors.js';
import {
  checkCompactRevision,
  checkCompares,
  checkFromRevision,
  checkKey,
  checkLeaseId,
  checkListener,
  checkMethodOptions,
  checkPrefix,
  checkStoreOptions,
  checkTtl,
  encodeValue,
  failedCompare,
  keyBytes,
  prefixEnd,
  type ResolvedWrite,
  resolveCommit,
  wholeOption,
} from './common.js';
import { betterSqlite3 } from './drivers.js';
import { type ChangeBatch, LocalWatchHub } from './local-watch.js';
import { bootClockId, monotonicNow } from './sqlite-clock.js';
import { databaseFileAt, type FileIdentity, fileAt, sameFile } from './sqlite-file.js';
import { enterWalMode } from './sqlite-wal.js';
import type {
  CommitOptions,
  DiscoveryEntry,
  DiscoveryEvent,
  DiscoveryOperation,
  DiscoverySnapshot,
  DiscoveryStore,
  DiscoveryValue,
  DiscoveryWatch,
  Lease,
  LeaseId,
  PutOptions,
  WatchListener,
  WatchOptions,
} from './types.js';

export interface SqliteDiscoveryOptions {
  /** How often watchers poll the revision counter (default 25 ms). */
  readonly pollIntervalMs?: number;
  /** How many revisions of change history are kept for resuming watchers (default 10,000). */
  readonly historyRevisions?: number;
  /** How long a write waits for another process's write lock (default 5,000 ms). */
  readonly busyTimeoutMs?: number;
  /**
   * The clock lease deadlines are kept in: monotonic milliseconds that every process using the file
   * reads alike (default: the machine's CLOCK_MONOTONIC, through `process.hrtime`).
   */
  readonly now?: () => number;
  /**
   * Which clock `now` reads: leases recorded under another clock are dropped when the file is
   * opened (default: the machine's boot id, so that a reboot, which restarts CLOCK_MONOTONIC,
   * expires the leases of the processes it ended). Give your own with your own `now`.
   */
  readonly clockId?: string;
  /**
   * The permission bits a new database file is created with, whatever the umask (default `0o600`, its
   * owner only). SQLite gives its `-wal` and `-shm` side files the database file's bits. A file that
   * exists keeps the bits it has.
   */
  readonly fileMode?: number;
}

/** What `closeRemovingCreatedFile` removes besides the database file. */
export interface CloseRemovingCreatedFileOptions {
  /**
   * Files created beside the database for its sake (the cluster secret created for it, say), removed with
   * it and only with it: before it, while this store holds the database's exclusive lock. A process that
   * opens the database and then reads such a file either finds one its creator no longer removes, or
   * finds the database gone and opens a new one. Relative paths are taken from the working directory.
   */
  readonly companionFiles?: readonly string[];
}

/** Discovery records name every worker's memory: by default only the file's owner reads them. */
const defaultSqliteFileMode = 0o600;

/** The tables of the discovery schema; a database holding others belongs to something else. */
const discoveryTables = new Set(['meta', 'kv', 'leases', 'clock', 'events']);

/**
 * The version of the discovery schema, which a store records (`PRAGMA user_version`) in the file whose schema
 * it creates. A file with the schema and no version (0) was written by a version that recorded none: the
 * same schema as version 1.
 */
const sqliteSchemaVersion = 1;

const schemaVersionOf = (db: Database.Database): number => db.pragma('user_version', { simple: true }) as number;

/**
 * Refuses a file that is not a SQLite database, the database of something else (a negative version included), or
 * a discovery database of a newer schema version. A newer version may have tables of its own: a database with discovery's `meta` table,
 * or with no other, that records a newer version is refused as newer.
 */
function checkDiscoveryFile(db: Database.Database, path: string): void {
  let tables: string[];
  try {
    tables = db
      .prepare<[], string>(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
      )
      .pluck()
      .all();
  } catch (error) {
    if ((error as { code?: unknown }).code === 'SQLITE_NOTADB')
      throw new DiscoveryFileError(path, 'not a SQLite database', { cause: error });
    throw error;
  }
  const foreign = tables.filter((table) => !discoveryTables.has(table)).sort();
  const version = schemaVersionOf(db);
  if (version > sqliteSchemaVersion && (foreign.length === 0 || tables.includes('meta')))
    throw new DiscoveryFileVersionError(path, version, sqliteSchemaVersion);
  if (foreign.length > 0)
    throw new DiscoveryFileError(
      path,
      `a SQLite database of something else (its tables: ${foreign.join(', ')}), not a discovery database`,
    );
  if (version < 0)
    throw new DiscoveryFileError(
      path,
      `a SQLite database that records schema version ${version} (discovery's are 0 or above), not a discovery database`,
    );
}

/**
 * The meta row every opening of a file it did not create records, in the write transaction that opens
 * it: the first such opening is a write, which the file's creator sees (see `writtenByOthers`).
 */
const openedByOthers = 'opened_by_others';

const hasDiscoverySchema = (db: Database.Database): boolean =>
  db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'meta'").get() !== undefined;

/** What changes when another connection commits a write to the database: never this connection's own. */
const dataVersion = (db: Database.Database): number => db.pragma('data_version', { simple: true }) as number;

/**
 * Whether a connection other than the creator's has written to the file the creator's `db` created.
 * `creatorVersion` is the creator's `dataVersion` from the transaction in which it wrote the schema into
 * the file, which none had written to before; undefined when it never did, so that any schema is
 * another's. A write of any version counts, its claim or not: older versions of this package made no
 * claim when they opened a file, but what they published is a write.
 */
function writtenByOthers(db: Database.Database, creatorVersion: number | undefined): boolean {
  return creatorVersion === undefined ? hasDiscoverySchema(db) : dataVersion(db) !== creatorVersion;
}

const sqliteCode = (error: unknown): unknown => (error as { code?: unknown } | null)?.code;

/**
 * What the store at `path` reports for SQLite's `error` in `operation`: SQLITE_BUSY, which SQLite answers once
 * another connection held the write lock for all of `busyTimeoutMs`, as `DiscoveryLockHeldError`.
 */
function sqliteFailure(
  path: string,
  operation: string,
  key: string | undefined,
  busyTimeoutMs: number,
  error: unknown,
): DiscoveryUnavailableError {
  if (sqliteCode(error) === 'SQLITE_BUSY')
    return new DiscoveryLockHeldError(operation, key, path, busyTimeoutMs, { cause: error });
  return new DiscoveryUnavailableError('sqlite', operation, key, { cause: error, location: path });
}

/**
 * Removes the database file at `path` that `db` created and is connected to, with its side files and
 * `companions`, unless
 * another store has opened it: one connected now holds SQLite's shared lock on the file, so this
 * connection cannot take the exclusive one (SQLITE_BUSY), and one that wrote to it, its claim or what
 * it published, is a write by others (`writtenByOthers`). A store still opening it waits for the
 * exclusive lock to go, then finds the path no longer names the file it opened and opens again. The
 * side files go first, while the database file still keeps another process from creating a new one
 * whose side files would share their names. `db` is left in exclusive locking mode: close it next.
 * Whether it removed them.
 */
function removeUnclaimedFile(
  db: Database.Database,
  path: string,
  identity: FileIdentity,
  creatorVersion: number | undefined,
  companions: readonly string[] = [],
): boolean {
  const remove = (): boolean => {
    if (!sameFile(fileAt(path), identity)) return false;
    for (const file of [...companions, `${path}-wal`, `${path}-shm`, path]) rmSync(file, { force: true });
    return true;
  };
  db.pragma('busy_timeout = 0');
  db.pragma('locking_mode = EXCLUSIVE');
  try {
    return db.transaction(() => !writtenByOthers(db, creatorVersion) && remove()).exclusive();
  } catch (error) {
    if (sqliteCode(error) === 'SQLITE_BUSY') return false;
    // Stores refuse a file that is not a database before they write to it: none has opened it.
    if (sqliteCode(error) === 'SQLITE_NOTADB') return remove();
    throw error;
  }
}

function companionFilesOption(files: unknown): string[] {
  if (files === undefined) return [];
  if (!Array.isArray(files) || files.some((file) => typeof file !== 'string' || file === '')) {
    throw new DiscoveryArgumentError('sqlite', 'companionFiles', files, 'companion files are an array of paths');
  }
  return files.map((file: string) => resolve(file));
}

function fileModeOption(mode: number | undefined): number {
  if (mode === undefined) return defaultSqliteFileMode;
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o777 || (mode & 0o600) !== 0o600) {
    throw new DiscoveryArgumentError(
      'sqlite',
      'fileMode',
      mode,
      'a file mode is permission bits from 0o600 to 0o777 that let the owner read and write',
    );
  }
  return mode;
}

interface KvRow {
  key: Buffer;
  value: Buffer;
  create_rev: number;
  mod_rev: number;
  lease: number | null;
}

interface EventRow extends KvRow {
  revision: number;
  deleted: number;
}

/** The tables and rows every opening writes if they are absent; versions before the claim row wrote the same. */
export const discoverySchema = `
  CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
  INSERT OR IGNORE INTO meta (name, value) VALUES ('revision', 0), ('compacted', 0);
  CREATE TABLE IF NOT EXISTS kv (
    key BLOB PRIMARY KEY, value BLOB NOT NULL, create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL, lease INTEGER
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS kv_lease ON kv (lease) WHERE lease IS NOT NULL;
  CREATE TABLE IF NOT EXISTS leases (
    id INTEGER PRIMARY KEY AUTOINCREMENT, ttl_ms INTEGER NOT NULL, expires_at INTEGER NOT NULL
  );
  CREATE INDEX IF NOT EXISTS leases_expiry ON leases (expires_at);
  CREATE TABLE IF NOT EXISTS clock (id TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS events (
    revision INTEGER NOT NULL, seq INTEGER NOT NULL, deleted INTEGER NOT NULL, key BLOB NOT NULL,
    value BLOB, create_rev INTEGER, mod_rev INTEGER, lease INTEGER, PRIMARY KEY (revision, seq)
  ) WITHOUT ROWID;
`;

/** How many times an opening starts again because the path stopped naming the file it was opening. */
const openingAttempts = 5;

interface OpenedDatabase {
  readonly db: Database.Database;
  readonly created: boolean;
  readonly identity: FileIdentity;
  /** The creator's data version once it wrote the schema into its new file, if no other store wrote first (see `writtenByOthers`). */
  readonly creatorVersion: number | undefined;
}

/**
 * Opens the discovery database at `path`, creating it if it is absent, in WAL mode with the schema,
 * and claims it (`openedByOthers`) unless this opening created it. A file its creator removed (or
 * anything else replaced) while this opening was under way is given up before anything is written to
 * it, and the path is opened again.
 */
function openDatabase(path: string, fileMode: number, busyTimeoutMs: number): OpenedDatabase {
  const Driver = betterSqlite3();
  for (let attempt = 1; attempt <= openingAttempts; attempt++) {
    let file: { identity: FileIdentity; created: boolean } | undefined;
    try {
      file = databaseFileAt(path, fileMode);
    } catch (error) {
      throw new DiscoveryUnavailableError('sqlite', 'open', undefined, { cause: error, location: path });
    }
    if (file === undefined) continue;
    let db: Database.Database | undefined;
    try {
      // Not created here if it is gone: a file SQLite created would have neither the file mode nor a creator.
      db = new Driver(path, { timeout: busyTimeoutMs, fileMustExist: true });
    } catch (error) {
      if (!file.created && !sameFile(fileAt(path), file.identity)) continue;
      throw new DiscoveryUnavailableError('sqlite', 'open', undefined, { cause: error, location: path });
    }
    try {
      // Before anything is written, the journal mode included; again under the write lock below.
      checkDiscoveryFile(db, path);
      enterWalMode(db, busyTimeoutMs);
      db.pragma('synchronous = NORMAL');
      const connected = db;
      const { identity, created } = file;
      let creatorVersion: number | undefined;
      // The write lock held, and the shared lock WAL mode keeps from here on: the file's creator can
      // no longer remove it unseen, and if it already did, the path names another file or none.
      const stillThere = connected
        .transaction(() => {
          if (!sameFile(fileAt(path), identity)) return false;
          // A newer version (or something else) may have written the file since it was first checked.
          checkDiscoveryFile(connected, path);
          const writtenFirst = hasDiscoverySchema(connected);
          connected.exec(discoverySchema);
          // This connection's own writes leave its data version as it is: the creator's stays its claim.
          if (!writtenFirst) connected.pragma(`user_version = ${sqliteSchemaVersion}`);
          if (!created) connected.prepare('INSERT OR IGNORE INTO meta (name, value) VALUES (?, 1)').run(openedByOthers);
          else if (!writtenFirst) creatorVersion = dataVersion(connected);
          return true;
        })
        .immediate();
      if (stillThere) return { db, created, identity, creatorVersion };
      db.close();
    } catch (error) {
      abandonOpening(db, path, file, undefined);
      // SQLite may refuse the file its creator removed meanwhile: the path is opened again.
      if (!file.created && !sameFile(fileAt(path), file.identity)) continue;
      if (error instanceof DiscoveryFileError || error instanceof DiscoveryFileVersionError) throw error;
      throw sqliteFailure(path, 'open', undefined, busyTimeoutMs, error);
    }
  }
  throw new DiscoveryUnavailableError('sqlite', 'open', undefined, {
    location: path,
    why: `the file was removed or replaced while it was being opened, ${openingAttempts} times over`,
  });
}

/**
 * Closes what a failed opening opened, and removes the database file if it created it and no other store
 * has opened it: nothing is left half-made. The opening's own failure is what its caller hears.
 */
function abandonOpening(
  db: Database.Database | undefined,
  path: string,
  file: { identity: FileIdentity; created: boolean },
  creatorVersion: number | undefined,
): void {
  if (db === undefined) return;
  try {
    if (file.created) removeUnclaimedFile(db, path, file.identity, creatorVersion);
  } catch {
    // The file stays: this opening cannot tell whether another store uses it.
  } finally {
    db.close();
  }
}

const toEntry = (row: KvRow): DiscoveryEntry => ({
  key: row.key.toString('utf8'),
  value: new Uint8Array(row.value.buffer, row.value.byteOffset, row.value.byteLength),
  createRevision: row.create_rev,
  modRevision: row.mod_rev,
  lease: row.lease === null ? undefined : String(row.lease),
});

/**
 * Discovery for several processes on one machine, in one SQLite file (WAL). Every write is an
 * IMMEDIATE transaction that bumps one revision counter and appends its changes to an event log;
 * leases are CLOCK_MONOTONIC deadlines, dropped once the machine reboots, swept by whichever process
 * touches the store next; watchers poll the revision counter (one indexed read per tick) and read the
 * log only when it moved.
 */
export class SqliteDiscoveryStore implements DiscoveryStore {
  readonly backend = 'sqlite';
  private readonly db: Database.Database;
  private readonly hub: LocalWatchHub;
  private readonly now: () => number;
  private readonly pollIntervalMs: number;
  private readonly historyRevisions: number;
  private readonly busyTimeoutMs: number;
  private readonly statements;
  /** Runs a step in a transaction once the file is found to be of a version this store knows (`read`, `write`). */
  private readonly checkedTransaction: Database.Transaction<(step: () => unknown) => unknown>;
  private pollTimer: NodeJS.Timeout | undefined;
  private polledRevision = 0;
  private pollFailure: DiscoveryUnavailableError | undefined;
  private closed = false;
  /** The database file, resolved to an absolute path (relative paths are taken from the working directory). */
  readonly path: string;
  /** The clock the lease deadlines are in (`clockId`). */
  readonly clockId: string;
  /** Whether opening this store created its database file (another process may have created it first). */
  readonly createdFile: boolean;
  /** The file this store opened, which its path named when it was opened. */
  private readonly identity: FileIdentity;
  /** See `OpenedDatabase.creatorVersion`. */
  private readonly creatorVersion: number | undefined;

  constructor(path: string, options: SqliteDiscoveryOptions = {}) {
    if (typeof path !== 'string' || path.length === 0) {
      throw new DiscoveryArgumentError('sqlite', 'path', path, 'the database path is a non-empty string');
    }
    this.path = resolve(path);
    checkStoreOptions(this.backend, options);
    this.now = options.now ?? monotonicNow;
    if (options.clockId !== undefined && (typeof options.clockId !== 'string' || options.clockId.length === 0)) {
      throw new DiscoveryArgumentError(this.backend, 'clockId', options.clockId, 'a clock id is a non-empty string');
    }
    this.clockId = options.clockId ?? bootClockId();
    this.pollIntervalMs = wholeOption(this.backend, 'pollIntervalMs', options.pollIntervalMs, 25);
    this.historyRevisions = wholeOption(this.backend, 'historyRevisions', options.historyRevisions, 10_000);
    this.busyTimeoutMs = wholeOption(this.backend, 'busyTimeoutMs', options.busyTimeoutMs, 5_000);
    const fileMode = fileModeOption(options.fileMode);
    const opened = openDatabase(this.path, fileMode, this.busyTimeoutMs);
    this.db = opened.db;
    this.createdFile = opened.created;
    this.identity = opened.identity;
    this.creatorVersion = opened.creatorVersion;
    const db = this.db;
    this.statements = {
      revision: db.prepare<[], number>("SELECT value FROM meta WHERE name = 'revision'").pluck(),
      compacted: db.prepare<[], number>("SELECT value FROM meta WHERE name = 'compacted'").pluck(),
      setMeta: db.prepare<[number, string]>('UPDATE meta SET value = ? WHERE name = ?'),
      get: db.prepare<[Buffer], KvRow>('SELECT * FROM kv WHERE key = ?'),
      range: db.prepare<[Buffer, Buffer], KvRow>('SELECT * FROM kv WHERE key >= ? AND key < ? ORDER BY key'),
      rangeAll: db.prepare<[Buffer], KvRow>('SELECT * FROM kv WHERE key >= ? ORDER BY key'),
      upsert: db.prepare<[Buffer, Buffer, number, number, number | null]>(
        `INSERT INTO kv (key, value, create_rev, mod_rev, lease) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, mod_rev = excluded.mod_rev, lease = excluded.lease`,
      ),
      remove: db.prepare<[Buffer]>('DELETE FROM kv WHERE key = ?'),
      logEvent: db.prepare<
        [number, number, number, Buffer, Buffer | null, number | null, number | null, number | null]
      >(
        'INSERT INTO events (revision, seq, deleted, key, value, create_rev, mod_rev, lease) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      eventsFrom: db.prepare<[number], EventRow>('SELECT * FROM events WHERE revision >= ? ORDER BY revision, seq'),
      compact: db.prepare<[number]>('DELETE FROM events WHERE revision <= ?'),
      grant: db.prepare<[number, number]>('INSERT INTO leases (ttl_ms, expires_at) VALUES (?, ?)'),
      leaseTtl: db.prepare<[number], number>('SELECT ttl_ms FROM leases WHERE id = ?').pluck(),
      renew: db.prepare<[number, number]>('UPDATE leases SET expires_at = ? + ttl_ms WHERE id = ?'),
      dropLease: db.prepare<[number]>('DELETE FROM leases WHERE id = ?'),
      leaseKeys: db.prepare<[number], Buffer>('SELECT key FROM kv WHERE lease = ?').pluck(),
      nextExpiry: db.prepare<[], number | null>('SELECT MIN(expires_at) FROM leases').pluck(),
      expired: db.prepare<[number], number>('SELECT id FROM leases WHERE expires_at <= ?').pluck(),
      allLeases: db.prepare<[], number>('SELECT id FROM leases').pluck(),
      clock: db.prepare<[], string>('SELECT id FROM clock').pluck(),
      clearClock: db.prepare('DELETE FROM clock'),
      setClock: db.prepare<[string]>('INSERT INTO clock (id) VALUES (?)'),
      schemaVersion: db.prepare<[], number>('PRAGMA user_version').pluck(),
    };
    this.checkedTransaction = db.transaction((step: () => unknown) => {
      const version = this.statements.schemaVersion.get() ?? 0;
      if (version > sqliteSchemaVersion) throw new DiscoveryFileVersionError(this.path, version, sqliteSchemaVersion);
      return step();
    });
    try {
      this.write(() => this.adoptClock());
    } catch (error) {
      abandonOpening(this.db, this.path, { identity: this.identity, created: this.createdFile }, this.creatorVersion);
      if (error instanceof DiscoveryFileVersionError) throw error;
      throw sqliteFailure(this.path, 'open', undefined, this.busyTimeoutMs, error);
    }
    this.hub = new LocalWatchHub({
      currentRevision: () => this.read(() => this.statements.revision.get() ?? 0),
      batchesFrom: (from) => this.batchesFrom(from),
      snapshot: (prefix) => this.snapshot(prefix),
    });
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    checkTtl(this.backend, ttlMs);
    return this.run('grantLease', undefined, () =>
      this.write(() => {
        const id = this.statements.grant.run(ttlMs, this.now() + ttlMs).lastInsertRowid;
        return { id: String(id), ttlMs };
      }),
    );
  }

  async keepAlive(lease: LeaseId): Promise<void> {
    const id = Number(checkLeaseId(this.backend, lease));
    this.run('keepAlive', undefined, () =>
      this.write(() => {
        if (this.statements.renew.run(this.now(), id).changes === 0) throw new DiscoveryLeaseError(this.backend, lease);
      }),
    );
  }

  async revokeLease(lease: LeaseId): Promise<void> {
    const id = Number(checkLeaseId(this.backend, lease));
    this.run('revokeLease', undefined, () => this.write(() => this.dropLeases([id])));
  }

  async put(key: string, value: DiscoveryValue, options: PutOptions = {}): Promise<number> {
    checkKey(this.backend, key);
    checkMethodOptions(this.backend, 'put', options);
    const lease = options.lease === undefined ? undefined : checkLeaseId(this.backend, options.lease);
    const write: ResolvedWrite = { type: 'put', value: encodeValue(this.backend, key, value), lease };
    return this.run('put', key, () => this.write(() => this.apply(new Map([[key, write]]))));
  }

  async get(key: string): Promise<DiscoveryEntry | undefined> {
    checkKey(this.backend, key);
    return this.run('get', key, () =>
      this.read(() => {
        const row = this.statements.get.get(keyBytes(key));
        return row === undefined ? undefined : toEntry(row);
      }),
    );
  }

  async list(prefix: string): Promise<DiscoverySnapshot> {
    checkPrefix(this.backend, prefix);
    return this.run('list', prefix, () => this.snapshot(prefix));
  }

  async delete(key: string): Promise<boolean> {
    checkKey(this.backend, key);
    return this.run('delete', key, () =>
      this.write(() => {
        if (this.statements.get.get(keyBytes(key)) === undefined) return false;
        this.apply(new Map([[key, { type: 'delete' }]]));
        return true;
      }),
    );
  }

  async commit(operations: readonly DiscoveryOperation[], options?: CommitOptions): Promise<number> {
    const compares = checkCompares(this.backend, options);
    return this.run('commit', undefined, () =>
      this.write(() => {
        const writes = resolveCommit(
          this.backend,
          operations,
          (prefix) => this.rangeRows(prefix).map((row) => row.key.toString('utf8')),
          (key) => this.statements.get.get(keyBytes(key)) !== undefined,
        );
        const refused = failedCompare(
          this.backend,
          compares,
          (key) => this.statements.get.get(keyBytes(key))?.mod_rev ?? 0,
        );
        if (refused !== undefined) throw refused;
        return writes.size === 0 ? (this.statements.revision.get() ?? 0) : this.apply(writes);
      }),
    );
  }

  async compact(revision: number): Promise<void> {
    this.run('compact', undefined, () =>
      this.write(() =>
        this.forgetBefore(checkCompactRevision(this.backend, revision, this.statements.revision.get() ?? 0)),
      ),
    );
  }

  async watch(prefix: string, listener: WatchListener, options: WatchOptions = {}): Promise<DiscoveryWatch> {
    checkPrefix(this.backend, prefix);
    checkListener(this.backend, listener);
    checkMethodOptions(this.backend, 'watch', options);
    const fromRevision = checkFromRevision(this.backend, options.fromRevision);
    return this.run('watch', prefix, () => {
      if (this.pollTimer === undefined) {
        this.polledRevision = this.read(() => this.statements.revision.get() ?? 0);
        this.pollTimer = setInterval(() => this.poll(), this.pollIntervalMs);
      }
      return this.hub.add(prefix, listener, fromRevision);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.shut();
    this.db.close();
  }

  /**
   * Closes the store and removes its database file, with the `-wal` and `-shm` files, if opening this store
   * created it and no other store has opened it since: a file another store uses, or has used, is kept and
   * stays where that store and the later ones find it. A store of an older version of this package, which
   * makes no claim on the file it opens, counts once it has written to it. For a process that opened a
   * store and then gave up before using it. `companionFiles` go with the database file, and only with it.
   * Resolves whether it removed the file.
   */
  async closeRemovingCreatedFile(options: CloseRemovingCreatedFileOptions = {}): Promise<boolean> {
    if (this.closed) throw new DiscoveryClosedError(this.backend, 'closeRemovingCreatedFile');
    checkMethodOptions(this.backend, 'closeRemovingCreatedFile', options);
    const companions = companionFilesOption(options.companionFiles);
    this.shut();
    try {
      return (
        this.createdFile && removeUnclaimedFile(this.db, this.path, this.identity, this.creatorVersion, companions)
      );
    } catch (error) {
      throw new DiscoveryUnavailableError(this.backend, 'closeRemovingCreatedFile', undefined, {
        cause: error,
        location: this.path,
      });
    } finally {
      this.db.close();
    }
  }

  /** Stops the watches and the poll timer; the connection is closed by the caller. */
  private shut(): void {
    this.closed = true;
    clearInterval(this.pollTimer);
    this.hub.closeAll();
  }

  /** Runs a step after sweeping expired leases; wraps SQLite failures (`sqliteFailure`). */
  private run<T>(operation: string, key: string | undefined, step: () => T): T {
    if (this.closed) throw new DiscoveryClosedError(this.backend, operation);
    try {
      this.sweepExpired();
      return step();
    } catch (error) {
      if (error instanceof DiscoveryError) throw error;
      throw sqliteFailure(this.path, operation, key, this.busyTimeoutMs, error);
    }
  }

  /**
   * Runs `step` in a write transaction, under the write lock. A newer version may have upgraded the file
   * since this store opened it: such a file is refused before `step` writes anything.
   */
  private write<T>(step: () => T): T {
    return this.checkedTransaction.immediate(step) as T;
  }

  /**
   * Runs `step` in a read transaction, refusing a file a newer version upgraded since this store opened it,
   * whose tables `step` would read as this version's. The check reads the database header, which SQLite
   * reads at the start of every transaction anyway, and the transaction is made once: a read costs a few
   * microseconds more than `step` alone.
   */
  private read<T>(step: () => T): T {
    return this.checkedTransaction(step) as T;
  }

  /** Drops the leases recorded under another clock (a previous boot) and records ours. Call inside a write transaction. */
  private adoptClock(): void {
    if (this.statements.clock.get() === this.clockId) return;
    this.dropLeases(this.statements.allLeases.all());
    this.statements.clearClock.run();
    this.statements.setClock.run(this.clockId);
  }

  private sweepExpired(): void {
    const next = this.read(() => this.statements.nextExpiry.get());
    if (next === null || next === undefined || next > this.now()) return;
    this.write(() => this.dropLeases(this.statements.expired.all(this.now())));
  }

  /** Deletes leases and, as one revision, every key they held. Call inside a write transaction. */
  private dropLeases(ids: readonly number[]): void {
    const writes = new Map<string, ResolvedWrite>();
    for (const id of ids) {
      for (const key of this.statements.leaseKeys.all(id)) writes.set(key.toString('utf8'), { type: 'delete' });
      this.statements.dropLease.run(id);
    }
    if (writes.size > 0) this.apply(writes);
  }

  /** Applies writes as one revision and logs them. Call inside a write transaction. */
  private apply(writes: ReadonlyMap<string, ResolvedWrite>): number {
    const s = this.statements;
    for (const [key, write] of writes) {
      if (write.type === 'put' && write.lease !== undefined && s.leaseTtl.get(Number(write.lease)) === undefined) {
        throw new DiscoveryLeaseError(this.backend, write.lease, key);
      }
    }
    const revision = (s.revision.get() ?? 0) + 1;
    let seq = 0;
    for (const [key, write] of writes) {
      const bytes = keyBytes(key);
      if (write.type === 'delete') {
        s.remove.run(bytes);
        s.logEvent.run(revision, seq++, 1, bytes, null, null, null, null);
        continue;
      }
      const value = Buffer.from(write.value.buffer, write.value.byteOffset, write.value.byteLength);
      const lease = write.lease === undefined ? null : Number(write.lease);
      const createRevision = s.get.get(bytes)?.create_rev ?? revision;
      s.upsert.run(bytes, value, createRevision, revision, lease);
      s.logEvent.run(revision, seq++, 0, bytes, value, createRevision, revision, lease);
    }
    s.setMeta.run(revision, 'revision');
    this.forgetBefore(revision + 1 - this.historyRevisions);
    return revision;
  }

  /** Drops the logged changes before `revision`. Call inside a write transaction. */
  private forgetBefore(revision: number): void {
    if (revision - 1 <= (this.statements.compacted.get() ?? 0)) return;
    this.statements.compact.run(revision - 1);
    this.statements.setMeta.run(revision - 1, 'compacted');
  }

  private rangeRows(prefix: string): KvRow[] {
    const start = keyBytes(prefix);
    const end = prefixEnd(start);
    return end.length === 0 ? this.statements.rangeAll.all(start) : this.statements.range.all(start, end);
  }

  private snapshot(prefix: string): DiscoverySnapshot {
    return this.read(() => ({
      entries: this.rangeRows(prefix).map(toEntry),
      revision: this.statements.revision.get() ?? 0,
    }));
  }

  private batchesFrom(from: number): ChangeBatch[] | undefined {
    return this.read(() => {
      if (from <= (this.statements.compacted.get() ?? 0)) return undefined;
      const batches: { revision: number; events: DiscoveryEvent[] }[] = [];
      for (const row of this.statements.eventsFrom.iterate(from)) {
        const event: DiscoveryEvent =
          row.deleted === 1
            ? { type: 'delete', key: row.key.toString('utf8'), revision: row.revision }
            : { type: 'put', entry: toEntry(row) };
        const last = batches.at(-1);
        if (last?.revision === row.revision) last.events.push(event);
        else batches.push({ revision: row.revision, events: [event] });
      }
      return batches;
    });
  }

  private poll(): void {
    if (this.closed) return;
    if (this.hub.size === 0) {
      clearInterval(this.pollTimer);
      this.pollTimer = undefined;
      return;
    }
    try {
      this.sweepExpired();
      const current = this.read(() => this.statements.revision.get() ?? 0);
      if (current > this.polledRevision) {
        const batches = this.batchesFrom(this.polledRevision + 1);
        this.polledRevision = current;
        if (batches === undefined) this.hub.resyncAll('the change history moved past this watcher between two polls');
        else this.hub.publish(batches);
      }
      if (this.pollFailure !== undefined) {
        this.pollFailure = undefined;
        this.hub.broadcast({ type: 'restored' });
      }
    } catch (error) {
      // The next tick tries again; watchers are told once that their view may be stale.
      if (this.pollFailure === undefined) {
        this.pollFailure = sqliteFailure(this.path, 'watch poll', undefined, this.busyTimeoutMs, error);
        this.hub.broadcast({ type: 'outage', error: this.pollFailure });
      }
    }
  }
}

export function openSqliteDiscovery(path: string, options?: SqliteDiscoveryOptions): SqliteDiscoveryStore {
  return new SqliteDiscoveryStore(path, options);
}
