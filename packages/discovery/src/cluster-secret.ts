// The cluster secret: the key every process publishing to and reading from one discovery store shares,
// under which transport metadata is sealed (see metadata-seal.ts).
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { closeSync, fstatSync, linkSync, openSync, readSync, unlinkSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { discoveryGroup } from './settings.js';
import type { SettingsOf } from '@kvreuse/config';
import { ClusterSecretError } from './errors.js';

/** A secret shorter than an HMAC-SHA256 key's block of entropy is refused. */
export const clusterSecretMinBytes = 32;
/** A secret file is a key, not a document; a larger file is refused rather than read. */
const clusterSecretMaxBytes = 4096;

/** AES-256-GCM's nonce and authentication tag sizes, as `ClusterSecret.seal` writes them. */
export const sealNonceBytes = 12;
export const sealTagBytes = 16;

/** What `ClusterSecret.seal` returns: the random nonce, the authentication tag and the ciphertext. */
export interface SealedBytes {
  readonly nonce: Uint8Array;
  readonly tag: Uint8Array;
  readonly ciphertext: Uint8Array;
}

/** The key transport metadata is sealed with; where it came from (`origin`) is named in refusals. */
export class ClusterSecret {
  readonly #key: Buffer;
  readonly #derivedKeys = new Map<string, Buffer>();

  private constructor(
    key: Buffer,
    /** The secret file's absolute path, or `random secret of process <pid>`. */
    readonly origin: string,
    /** Whether `readOrCreate` created the secret file: this process won the race to create it. */
    readonly createdFile = false,
  ) {
    this.#key = key;
  }

  /**
   * Reads the secret file at `path`: a regular file of 32 to 4096 bytes that only its owner can access. A
   * symbolic link is followed (a Kubernetes secret volume links its files) and the file it names is checked.
   */
  static read(path: string): ClusterSecret {
    return ClusterSecret.#readFile(resolve(path), false);
  }

  static #readFile(absolute: string, created: boolean): ClusterSecret {
    let fd: number;
    try {
      fd = openSync(absolute, 'r');
    } catch (cause) {
      throw new ClusterSecretError(
        absolute,
        `cannot be opened (${(cause as NodeJS.ErrnoException).code ?? String(cause)})`,
        { cause },
      );
    }
    try {
      const stat = fstatSync(fd);
      if (!stat.isFile()) throw new ClusterSecretError(absolute, 'is not a regular file');
      if ((stat.mode & 0o077) !== 0) {
        throw new ClusterSecretError(
          absolute,
          `is open to its group or others (mode ${(stat.mode & 0o777).toString(8).padStart(4, '0')}); chmod 600 it`,
        );
      }
      if (stat.size < clusterSecretMinBytes || stat.size > clusterSecretMaxBytes) {
        throw new ClusterSecretError(
          absolute,
          `holds ${stat.size} bytes; a cluster secret holds ${clusterSecretMinBytes} to ${clusterSecretMaxBytes}`,
        );
      }
      const key = Buffer.alloc(stat.size);
      const read = readSync(fd, key, 0, key.length, 0);
      if (read !== key.length)
        throw new ClusterSecretError(absolute, `changed while it was read (${read} of ${key.length} bytes)`);
      return new ClusterSecret(key, absolute, created);
    } finally {
      closeSync(fd);
    }
  }

  /**
   * Creates the secret file at `path` with 32 random bytes and mode 0600 unless a file is there already,
   * then reads it. Processes creating it at the same time all read the one that won: the file appears
   * whole (linked from a finished temporary file) or not at all; only the one that won has `createdFile` set.
   */
  static readOrCreate(path: string): ClusterSecret {
    const absolute = resolve(path);
    const draft = `${absolute}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    let created = false;
    try {
      writeFileSync(draft, randomBytes(clusterSecretMinBytes), { mode: 0o600, flag: 'wx' });
      linkSync(draft, absolute);
      created = true;
    } catch (cause) {
      if ((cause as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new ClusterSecretError(
          absolute,
          `cannot be created (${(cause as NodeJS.ErrnoException).code ?? String(cause)})`,
          { cause },
        );
      }
    } finally {
      try {
        unlinkSync(draft);
      } catch {
        // Never written (its directory is missing): the creation error above says why.
      }
    }
    return ClusterSecret.#readFile(absolute, created);
  }

  /** The memory backend's secret: random, one per process, as the memory store serves one process. */
  static ofThisProcess(): ClusterSecret {
    processSecret ??= new ClusterSecret(randomBytes(clusterSecretMinBytes), `random secret of process ${process.pid}`);
    return processSecret;
  }

  /**
   * Encrypts and authenticates `plaintext` with AES-256-GCM under a key derived from this secret for
   * `purpose` (HKDF-SHA256), binding `associated` (authenticated, not encrypted); a fresh random nonce
   * each time.
   */
  seal(purpose: string, plaintext: Uint8Array, associated: Uint8Array): SealedBytes {
    const nonce = randomBytes(sealNonceBytes);
    const cipher = createCipheriv('aes-256-gcm', this.#derivedKey(purpose), nonce, { authTagLength: sealTagBytes });
    cipher.setAAD(associated);
    const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return { nonce, tag: cipher.getAuthTag(), ciphertext };
  }

  /** The plaintext `seal(purpose, …, associated)` sealed, or undefined when another key sealed it or any byte changed. */
  open(purpose: string, sealed: SealedBytes, associated: Uint8Array): Buffer | undefined {
    if (sealed.nonce.length !== sealNonceBytes || sealed.tag.length !== sealTagBytes) return undefined;
    const decipher = createDecipheriv('aes-256-gcm', this.#derivedKey(purpose), sealed.nonce, {
      authTagLength: sealTagBytes,
    });
    decipher.setAAD(associated);
    decipher.setAuthTag(sealed.tag);
    try {
      return Buffer.concat([decipher.update(sealed.ciphertext), decipher.final()]);
    } catch {
      return undefined;
    }
  }

  #derivedKey(purpose: string): Buffer {
    let key = this.#derivedKeys.get(purpose);
    if (key === undefined) {
      key = Buffer.from(hkdfSync('sha256', this.#key, Buffer.alloc(0), `kvreuse ${purpose}`, 32));
      this.#derivedKeys.set(purpose, key);
    }
    return key;
  }

  /** HMAC-SHA256 of the concatenated `parts` under a key derived from this secret for `purpose` (HKDF-SHA256). */
  authenticate(purpose: string, ...parts: readonly Uint8Array[]): Buffer {
    const hmac = createHmac('sha256', this.#derivedKey(purpose));
    for (const part of parts) hmac.update(part);
    return hmac.digest();
  }

  /** HMAC-SHA256 of the concatenated `parts` under this secret. */
  sign(...parts: readonly Uint8Array[]): Buffer {
    const hmac = createHmac('sha256', this.#key);
    for (const part of parts) hmac.update(part);
    return hmac.digest();
  }

  /** Whether `tag` is the HMAC-SHA256 of the concatenated `parts` under this secret (compared in constant time). */
  verifies(tag: Uint8Array, ...parts: readonly Uint8Array[]): boolean {
    const expected = this.sign(...parts);
    return tag.length === expected.length && timingSafeEqual(tag, expected);
  }
}

let processSecret: ClusterSecret | undefined;

/** The `discovery.*` settings that locate the cluster secret (a resolved `settings.discovery` fits). */
export type ClusterSecretSettings = Pick<
  SettingsOf<[typeof discoveryGroup]>['discovery'],
  'backend' | 'sqlitePath' | 'secretFile'
>;

/**
 * The cluster secret the settings name: `secretFile` when set; otherwise, for `sqlite`, the file
 * `<sqlitePath>.secret` beside the database (created when absent), for `memory` the process's random
 * secret. `etcd` spans machines, which must share one secret file: without `secretFile` it is refused.
 */
export function openClusterSecret(settings: ClusterSecretSettings): ClusterSecret {
  const { backend, sqlitePath, secretFile } = settings;
  if (typeof secretFile !== 'string')
    throw new ClusterSecretError('discovery.secret_file', 'must be a path (a string; empty for the default)');
  if (secretFile !== '') {
    try {
      return ClusterSecret.read(secretFile);
    } catch (error) {
      if (!(error instanceof ClusterSecretError)) throw error;
      throw new ClusterSecretError(error.secret, error.reason, { cause: error, setting: 'discovery.secret_file' });
    }
  }
  switch (backend) {
    case 'sqlite':
      return ClusterSecret.readOrCreate(`${sqlitePath}.secret`);
    case 'memory':
      return ClusterSecret.ofThisProcess();
    default:
      throw new ClusterSecretError(
        'discovery.secret_file',
        `is empty, and the ${String(backend)} backend has no default: name a file of at least ${clusterSecretMinBytes} random bytes, mode 0600, that every machine of the cluster shares`,
      );
  }
}
