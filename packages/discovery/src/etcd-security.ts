// What an etcd client presents to a secured cluster: TLS certificates and a user's password, read
// from the files the options name, and what etcd's refusals of them mean.
import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { createSecureContext, rootCertificates } from 'node:tls';
import type { IOptions } from 'etcd3';
import {
  DiscoveryArgumentError,
  DiscoveryAuthenticationError,
  DiscoveryCredentialsFileError,
  DiscoveryPermissionError,
  DiscoveryTlsError,
  type DiscoveryError,
} from './errors.js';
import { etcd3 } from './drivers.js';

/** PEM files for TLS to etcd (`https://` endpoints). */
export interface EtcdTlsFiles {
  /** The authority that signed the servers' certificates (default: the authorities Node.js trusts). */
  readonly caFile?: string | undefined;
  /** A client certificate to present, for a cluster that requires one (with `keyFile`). */
  readonly certFile?: string | undefined;
  /** The private key of `certFile`. */
  readonly keyFile?: string | undefined;
}

/** An etcd user, for a cluster with authentication enabled. */
export interface EtcdUser {
  readonly username: string;
  /** A file whose content is the password (one trailing newline is ignored), so it is in no argv or settings. */
  readonly passwordFile: string;
}

const backend = 'etcd';

function readOptionFile(option: string, path: unknown): Buffer {
  if (typeof path !== 'string' || path === '') {
    throw new DiscoveryArgumentError(backend, option, path, `${option} is the path of a file`);
  }
  let content: Buffer;
  try {
    content = readFileSync(path);
  } catch (error) {
    throw new DiscoveryCredentialsFileError(backend, option, path, (error as Error).message, { cause: error });
  }
  if (content.length === 0) throw new DiscoveryCredentialsFileError(backend, option, path, 'the file is empty');
  return content;
}

/** The etcd3 client's `credentials` for `tls` (read now, so that a bad file fails when the store is made). */
export function tlsCredentials(tls: EtcdTlsFiles, hosts: readonly string[]): NonNullable<IOptions['credentials']> {
  if (typeof tls !== 'object' || tls === null)
    throw new DiscoveryArgumentError(backend, 'tls', tls, 'tls is an object of file paths');
  const plain = hosts.find((host) => !host.startsWith('https://'));
  if (plain !== undefined)
    throw new DiscoveryArgumentError(backend, 'hosts', plain, 'with tls, every host is an https:// URL');
  if ((tls.certFile === undefined) !== (tls.keyFile === undefined)) {
    throw new DiscoveryArgumentError(
      backend,
      tls.certFile === undefined ? 'tls.keyFile' : 'tls.certFile',
      tls.certFile ?? tls.keyFile,
      'tls.certFile and tls.keyFile are given together',
    );
  }
  const credentials = {
    rootCertificate:
      tls.caFile === undefined ? Buffer.from(rootCertificates.join('\n')) : readOptionFile('tls.caFile', tls.caFile),
    ...(tls.certFile === undefined
      ? {}
      : {
          certChain: readOptionFile('tls.certFile', tls.certFile),
          privateKey: readOptionFile('tls.keyFile', tls.keyFile),
        }),
  };
  checkPem(tls, credentials);
  return credentials;
}

/** Refuses, naming the file, what the TLS library would refuse as a bare error when the client is made (or, for a CA, at every handshake). */
function checkPem(
  tls: EtcdTlsFiles,
  credentials: { rootCertificate: Buffer; certChain?: Buffer; privateKey?: Buffer },
): void {
  const refuse = (option: string, path: string | undefined, check: () => unknown, what: string): void => {
    try {
      check();
    } catch (error) {
      throw new DiscoveryCredentialsFileError(backend, option, path ?? '', `${what} (${(error as Error).message})`, {
        cause: error,
      });
    }
  };
  if (tls.caFile !== undefined)
    refuse('tls.caFile', tls.caFile, () => new X509Certificate(credentials.rootCertificate), 'not a PEM certificate');
  const { certChain: cert, privateKey: key } = credentials;
  if (cert === undefined) return;
  refuse('tls.certFile', tls.certFile, () => createSecureContext({ cert }), 'not a PEM certificate');
  refuse('tls.keyFile', tls.keyFile, () => createSecureContext({ key }), 'not a PEM private key');
  refuse(
    'tls.keyFile',
    tls.keyFile,
    () => createSecureContext({ cert, key }),
    `not the private key of tls.certFile ${tls.certFile}`,
  );
}

/** The user name and password the etcd3 client authenticates with. */
export function userPassword(user: EtcdUser): { username: string; password: string } {
  if (typeof user !== 'object' || user === null)
    throw new DiscoveryArgumentError(backend, 'auth', user, 'auth is { username, passwordFile }');
  if (typeof user.username !== 'string' || user.username === '') {
    throw new DiscoveryArgumentError(backend, 'auth.username', user.username, 'a user name is a non-empty string');
  }
  const password = readOptionFile('auth.passwordFile', user.passwordFile)
    .toString('utf8')
    .replace(/\r?\n$/, '');
  if (password === '')
    throw new DiscoveryCredentialsFileError(
      backend,
      'auth.passwordFile',
      user.passwordFile,
      'the file holds only a newline',
    );
  return { username: user.username, password };
}

/** etcd's answer when auth is enabled and a request carries no user. */
const noUser = /user name is empty/;
/** etcd's refusal of a request, and its reason for cancelling a watch the user may not read. */
const permissionDenied = /etcdserver: permission denied/;
/** How a failed TLS handshake surfaces through gRPC, on either side. */
const handshake = /certificate|handshake|SSL|TLS|alert/i;

/** Tells etcd refusing a client's identity or rights from other failures, for one client. */
export class EtcdRefusals {
  /**
   * The last failed TLS handshake, until a request succeeds. gRPC names the handshake's error only
   * in the first failure: later requests on the same channel fail with "Last error: null".
   */
  private handshakeFailure: Error | undefined;

  constructor(
    private readonly hosts: readonly string[],
    private readonly username: string | undefined,
  ) {}

  succeeded(): void {
    this.handshakeFailure = undefined;
  }

  /** The typed error of a refusal of this client's certificate, credentials or rights, or undefined for any other failure. */
  refusal(error: unknown, operation: string, key: string | undefined): DiscoveryError | undefined {
    const { EtcdAuthenticationFailedError, EtcdPermissionDeniedError, GRPCUnavailableError } = etcd3();
    if (error instanceof EtcdAuthenticationFailedError) {
      return new DiscoveryAuthenticationError(backend, operation, this.username, { cause: error });
    }
    if (error instanceof Error && noUser.test(error.message))
      return new DiscoveryAuthenticationError(backend, operation, undefined, { cause: error });
    if (
      error instanceof EtcdPermissionDeniedError ||
      (error instanceof Error && permissionDenied.test(error.message))
    ) {
      return new DiscoveryPermissionError(backend, operation, key, this.username, { cause: error });
    }
    if (!(error instanceof GRPCUnavailableError)) return undefined;
    if (handshake.test(error.message)) this.handshakeFailure = error;
    return this.handshakeFailure === undefined
      ? undefined
      : new DiscoveryTlsError(backend, operation, this.hosts, { cause: this.handshakeFailure });
  }
}
