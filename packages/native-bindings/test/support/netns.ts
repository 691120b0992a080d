// The veth pairs of tools/test-support, and whether this package's network-namespace tests run here:
// they are skipped with a warning where namespaces cannot be made, and fail under CI, which requires them.
import { vethPairsUnavailable } from '@kvreuse-internal/test-support';
import { inCi } from './backends.js';

export { type NamespaceEnd, openVethPair, tcpOverVeth, type VethPair } from '@kvreuse-internal/test-support';

/** Why network namespaces cannot be made here (not root, no `ip`), or undefined where they can. */
export const namespacesUnavailable = vethPairsUnavailable();

/** Whether the network-namespace tests run: namespaces can be made here, or CI requires them (and they fail without). */
export const namespaceTestsRun = namespacesUnavailable === undefined || inCi;

if (namespacesUnavailable !== undefined) {
  const message = `native-bindings: ${namespacesUnavailable}`;
  if (inCi) console.error(`${message}; CI requires the network-namespace tests, so they will FAIL`);
  else console.warn(`${message}; the network-namespace tests are SKIPPED here`);
}
