// Test certificates made with openssl: a certificate authority, and certificates it signs for an
// etcd server on 127.0.0.1 and for its clients. EC P-256 keys, valid for one day.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CertificateFiles {
  readonly certFile: string;
  readonly keyFile: string;
}

export interface CertificateAuthority extends CertificateFiles {
  /** Issues a certificate for `name`: a server certificate for 127.0.0.1, or a client certificate. */
  issue(name: string, use: 'server' | 'client'): CertificateFiles;
}

function openssl(args: readonly string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A new certificate authority whose files are in `dir`, named after `name`. */
export function createCertificateAuthority(dir: string, name: string): CertificateAuthority {
  const ca = { certFile: join(dir, `${name}.pem`), keyFile: join(dir, `${name}-key.pem`) };
  openssl([
    'req',
    '-x509',
    ...newKey,
    '-keyout',
    ca.keyFile,
    '-out',
    ca.certFile,
    '-days',
    '1',
    '-subj',
    `/CN=${name}`,
  ]);
  return {
    ...ca,
    issue(subject, use) {
      const files = { certFile: join(dir, `${subject}.pem`), keyFile: join(dir, `${subject}-key.pem`) };
      const request = join(dir, `${subject}.csr`);
      const extensions = join(dir, `${subject}.ext`);
      writeFileSync(
        extensions,
        use === 'server'
          ? 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'
          : 'extendedKeyUsage=clientAuth\n',
      );
      openssl(['req', ...newKey, '-keyout', files.keyFile, '-out', request, '-subj', `/CN=${subject}`]);
      openssl([
        'x509',
        '-req',
        '-in',
        request,
        '-CA',
        ca.certFile,
        '-CAkey',
        ca.keyFile,
        '-CAcreateserial',
        '-out',
        files.certFile,
        '-days',
        '1',
        '-extfile',
        extensions,
      ]);
      return files;
    },
  };
}
