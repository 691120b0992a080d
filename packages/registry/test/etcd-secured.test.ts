// A secured etcd, as a production cluster runs: TLS with client certificates, authentication on,
// and each worker's user granted write access to its own keys only. Certificates are made by the
// test (openssl); the server runs on free loopback ports with its data in a temp dir.
import type { RankPart } from '@kvreuse/descriptors';
import { defineSettings } from '@kvreuse/config';
import { Etcd3, Range } from 'etcd3';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import {
  claimIncarnationEpoch,
  connectEtcdDiscovery,
  decodeRankPartRecord,
  defaultKeyPrefix,
  DiscoveryAuthenticationError,
  discoveryGroup,
  DiscoveryPermissionError,
  type DiscoveryStore,
  DiscoveryTlsError,
  type EtcdDiscoveryOptions,
  openDiscovery,
  publishRankParts,
  type WatchNotice,
  workerKeyPrefix,
  workerPartsPrefix,
} from '@kvreuse/discovery';
import { defaultInventoryPrefix, InventoryPublisher } from '@kvreuse/inventory';
import {
  type CertificateAuthority,
  type CertificateFiles,
  createCertificateAuthority,
  etcdRuns,
  EtcdServer,
  rankPartsOf,
} from '@kvreuse-internal/test-support';

vi.setConfig({ testTimeout: 60_000 });

const workers = ['decode-a', 'decode-b'] as const;
let dir: string;
let ca: CertificateAuthority;
let client: CertificateFiles;
let etcd: EtcdServer | undefined;
const passwordFile = (user: string) => join(dir, `${user}.password`);
const stores: DiscoveryStore[] = [];

/** What every worker presents: the test CA and a client certificate it signed. */
const tls = () => ({ caFile: ca.certFile, certFile: client.certFile, keyFile: client.keyFile });

function connect(options: Omit<EtcdDiscoveryOptions, 'hosts'>): DiscoveryStore {
  const store = connectEtcdDiscovery({ hosts: etcd!.url, requestTimeoutMs: 5_000, ...options });
  stores.push(store);
  return store;
}

const asWorker = (workerId: string) =>
  connect({ tls: tls(), auth: { username: workerId, passwordFile: passwordFile(workerId) } });

beforeAll(async () => {
  if (!etcdRuns) return;
  dir = mkdtempSync(join(tmpdir(), 'kvreuse-etcd-secured-'));
  ca = createCertificateAuthority(dir, 'kvreuse-test-ca');
  client = ca.issue('kvreuse-worker', 'client');
  etcd = await EtcdServer.start({
    server: ca.issue('etcd-server', 'server'),
    clientCa: ca.certFile,
    probe: { caFile: ca.certFile, client },
  });

  const admin = new Etcd3({
    hosts: etcd.url,
    credentials: {
      rootCertificate: readFileSync(ca.certFile),
      certChain: readFileSync(client.certFile),
      privateKey: readFileSync(client.keyFile),
    },
  });
  try {
    await admin.user('root').create('root-password');
    await admin.user('root').addRole('root');
    for (const workerId of workers) {
      const password = `password of ${workerId}`;
      writeFileSync(passwordFile(workerId), `${password}\n`);
      chmodSync(passwordFile(workerId), 0o600);
      // Write access to its own keys only (its rank parts, epochs and inventory key), read access to every kvreuse key.
      const role = await admin.role(`kvreuse-${workerId}`).create();
      await role.grant([
        { permission: 'Readwrite', range: Range.prefix(workerKeyPrefix(workerId)) },
        { permission: 'Readwrite', key: `${defaultInventoryPrefix}${workerId}` },
        { permission: 'Read', range: Range.prefix(defaultKeyPrefix) },
      ]);
      await admin.user(workerId).create(password);
      await admin.user(workerId).addRole(role);
    }
    await admin.auth.authEnable();
  } finally {
    admin.close();
  }
}, 60_000);

afterAll(async () => {
  await Promise.all(stores.map((store) => store.close()));
  await etcd?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const [partOfB] = rankPartsOf({ workerId: 'decode-b', incarnation: 'inc-b', tpSize: 1 }) as [RankPart];

test.skipIf(!etcdRuns)(
  'over TLS as its own user, a worker publishes its rank parts and inventory, and another worker watches them',
  async () => {
    // Worker A opens its store from settings, as the CLI does; worker B through the options.
    const { settings } = defineSettings([discoveryGroup]).resolve({
      argv: [
        '--discovery-backend=etcd',
        `--discovery-etcd-endpoints=${etcd!.url}`,
        `--discovery-etcd-ca-file=${ca.certFile}`,
        `--discovery-etcd-cert-file=${client.certFile}`,
        `--discovery-etcd-key-file=${client.keyFile}`,
        '--discovery-etcd-username=decode-a',
        `--discovery-etcd-password-file=${passwordFile('decode-a')}`,
      ],
      env: {},
    });
    const a = openDiscovery(settings.discovery);
    stores.push(a);
    const b = asWorker('decode-b');
    const notices: WatchNotice[] = [];
    await b.watch(workerKeyPrefix('decode-a'), (notice) => notices.push(notice));

    const parts = rankPartsOf({ workerId: 'decode-a', incarnation: 'inc-a', tpSize: 2 });
    const lease = await a.grantLease(10_000);
    const { epoch } = await claimIncarnationEpoch(a, { workerId: 'decode-a', incarnation: 'inc-a' });
    const revision = await publishRankParts(a, parts, { lease: lease.id, epoch });
    await new InventoryPublisher(a, { workerId: 'decode-a', incarnation: 'inc-a', epoch, lease: lease.id }).publish([]);

    const published = await b.list(workerPartsPrefix('decode-a'));
    expect(published.entries.map((entry) => decodeRankPartRecord(entry.key, entry.value).part)).toEqual(parts);
    expect((await b.get(`${defaultInventoryPrefix}decode-a`))?.lease).toBe(lease.id);
    await vi.waitFor(
      () => expect(notices.some((notice) => notice.type === 'changes' && notice.revision === revision)).toBe(true),
      { timeout: 20_000, interval: 10 },
    );
    await a.revokeLease(lease.id);
    expect((await b.list(workerPartsPrefix('decode-a'))).entries).toEqual([]);
  },
);

test.skipIf(!etcdRuns)(
  "worker A cannot write worker B's rank parts or inventory: etcd denies it, and nothing of the commit is written",
  async () => {
    const a = asWorker('decode-a');
    const b = asWorker('decode-b');
    const { epoch } = await claimIncarnationEpoch(b, partOfB);
    const leaseOfA = await a.grantLease(10_000);
    const before = await b.list(workerKeyPrefix('decode-b'));

    const publish = publishRankParts(a, [partOfB], { lease: leaseOfA.id, epoch });
    await expect(publish).rejects.toThrow(DiscoveryPermissionError);
    await expect(publish).rejects.toMatchObject({
      code: 'DISCOVERY_PERMISSION_DENIED',
      operation: 'commit',
      user: 'decode-a',
    });
    const inventory = new InventoryPublisher(a, {
      workerId: 'decode-b',
      incarnation: partOfB.incarnation,
      epoch,
      lease: leaseOfA.id,
    }).publish([]);
    await expect(inventory).rejects.toMatchObject({ code: 'DISCOVERY_PERMISSION_DENIED', user: 'decode-a' });
    await expect(a.delete(`${workerKeyPrefix('decode-b')}epoch`)).rejects.toMatchObject({
      code: 'DISCOVERY_PERMISSION_DENIED',
      key: `${workerKeyPrefix('decode-b')}epoch`,
      message: expect.stringContaining('user "decode-a" is not granted it'),
    });

    // Reading is granted under kvreuse/ only: a watch elsewhere is denied, not reported as an outage.
    for (const options of [{}, { fromRevision: 1 }]) {
      await expect(a.watch('elsewhere/', () => undefined, options)).rejects.toMatchObject({
        code: 'DISCOVERY_PERMISSION_DENIED',
        operation: 'watch',
        key: 'elsewhere/',
        user: 'decode-a',
      });
    }

    const after = await b.list(workerKeyPrefix('decode-b'));
    expect(after.entries).toEqual(before.entries);
    expect(await b.get(`${defaultInventoryPrefix}decode-b`)).toBeUndefined();
    // B itself may write there.
    const leaseOfB = await b.grantLease(10_000);
    await publishRankParts(b, [partOfB], { lease: leaseOfB.id, epoch });
    expect((await a.list(workerPartsPrefix('decode-b'))).entries).toHaveLength(1);
    await b.revokeLease(leaseOfB.id);
    await a.revokeLease(leaseOfA.id);
  },
);

test.skipIf(!etcdRuns)(
  'a client that does not trust the server, or presents no client certificate, fails with DiscoveryTlsError',
  async () => {
    const other = createCertificateAuthority(dir, 'another-ca');
    const auth = { username: 'decode-a', passwordFile: passwordFile('decode-a') };
    const distrusting = connect({ tls: { ...tls(), caFile: other.certFile }, auth });
    const anonymous = connect({ tls: { caFile: ca.certFile }, auth });
    for (const store of [distrusting, anonymous]) {
      for (const attempt of [() => store.get('kvreuse/x'), () => store.put(`${workerKeyPrefix('decode-a')}x`, 'v')]) {
        const failed = attempt();
        await expect(failed).rejects.toThrow(DiscoveryTlsError);
        await expect(failed).rejects.toMatchObject({
          code: 'DISCOVERY_TLS_FAILED',
          endpoints: [etcd!.url],
          message: expect.stringContaining('TLS handshake'),
        });
      }
    }
    await expect(distrusting.get('kvreuse/x')).rejects.toThrow(/unable to verify the first certificate/);
    await expect(anonymous.get('kvreuse/x')).rejects.toThrow(/bad certificate/);
  },
);

test.skipIf(!etcdRuns)(
  'a wrong password fails every request and watch with DiscoveryAuthenticationError naming the user',
  async () => {
    const wrong = join(dir, 'wrong.password');
    writeFileSync(wrong, 'not the password\n');
    const store = connect({ tls: tls(), auth: { username: 'decode-a', passwordFile: wrong } });
    for (const attempt of [
      () => store.get('kvreuse/x'),
      () => store.grantLease(10_000),
      () => store.watch('kvreuse/', () => undefined),
    ]) {
      const failed = attempt();
      await expect(failed).rejects.toThrow(DiscoveryAuthenticationError);
      await expect(failed).rejects.toMatchObject({
        code: 'DISCOVERY_AUTHENTICATION_FAILED',
        user: 'decode-a',
        message: expect.stringContaining('refused the credentials of user "decode-a"'),
      });
      // Neither password, the one refused nor the right one, is in any rendering of the error or the store.
      const error: unknown = await failed.catch((thrown: unknown) => thrown);
      const renderings = [
        String(error),
        inspect(error, { depth: Number.POSITIVE_INFINITY, showHidden: true }),
        JSON.stringify(error),
        JSON.stringify(store),
        inspect(store, { depth: Number.POSITIVE_INFINITY, showHidden: true }),
      ];
      for (const rendering of renderings) {
        expect(rendering).not.toContain('not the password');
        expect(rendering).not.toContain('password of decode-a');
      }
    }
  },
);

test.skipIf(!etcdRuns)(
  'without a user, a cluster with authentication on (and no client certificates) fails with DiscoveryAuthenticationError',
  async () => {
    const plain = await EtcdServer.start();
    try {
      const admin = new Etcd3({ hosts: plain.url });
      try {
        await admin.user('root').create('root-password');
        await admin.user('root').addRole('root');
        await admin.auth.authEnable();
      } finally {
        admin.close();
      }
      const store = connectEtcdDiscovery({ hosts: plain.url });
      stores.push(store);
      const failed = store.put('kvreuse/x', 'v');
      await expect(failed).rejects.toThrow(DiscoveryAuthenticationError);
      await expect(failed).rejects.toMatchObject({
        user: undefined,
        message: expect.stringContaining('requires authentication and no user is configured'),
      });
    } finally {
      await plain.stop();
    }
  },
);
