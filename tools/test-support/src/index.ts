/**
 * What the packages' tests share: a real etcd to start, test certificates, a manual clock, rank parts
 * as a worker would publish them, and the local discovery backends; two hosts on one machine (network
 * namespaces joined by a veth pair) for the tests of @kvreuse/native-bindings and tools/pack-install;
 * ports that stay a test's own between its server's restarts; and a process stopped until none of its
 * threads runs.
 */
export { type CertificateAuthority, type CertificateFiles, createCertificateAuthority } from './certificates.js';
export { ManualClock } from './clock.js';
export { EtcdProxy, EtcdServer, type EtcdServerTls, etcdBinary, etcdRequired, etcdRuns } from './etcd-server.js';
export { type FakeWorker, rankPartsOf } from './rank-parts.js';
export { portClaims, portIsFree, type PortRange, portsBelowEphemeral, reservePorts } from './ports.js';
export {
  type ClosingStore,
  type LocalBackend,
  localBackends,
  type LocalDiscoveryDrivers,
  type StoreUnderTest,
} from './stores.js';
export { stopProcess, threadStates } from './stopped-process.js';
export { type NamespaceEnd, openVethPair, tcpOverVeth, type VethPair, vethPairsUnavailable } from './veth-pair.js';
