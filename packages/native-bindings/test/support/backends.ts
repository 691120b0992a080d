import { type Backend, loadTransport } from '@kvreuse/native-bindings';

/** KVREUSE_TRANSPORT_LIBRARY points the tests (and their child processes) at another build of the library. */
const libraryPath = process.env['KVREUSE_TRANSPORT_LIBRARY'];
export const transport = loadTransport(libraryPath === undefined ? {} : { libraryPath });

const built = transport.capabilities().backends;
/** Whether this is a CI run (`.ci/run` sets CI=1): what a test needs must be there, or the test fails. */
export const inCi = process.env['CI'] !== undefined && !['', '0', 'false'].includes(process.env['CI']);

/**
 * The backends the facade tests run on. UCX is skipped, loudly, where it was not built — except in CI,
 * where a missing UCX backend must fail the run rather than be skipped.
 */
export const testedBackends: Backend[] = inCi
  ? ['loopback', 'ucx']
  : built.filter((b) => b === 'loopback' || b === 'ucx');

/** Whether the UCX tests run: UCX is built, or CI (`.ci/run` sets CI=1) requires them and they fail without it. */
export const ucxTestsRun = built.includes('ucx') || inCi;

if (!built.includes('ucx')) {
  const message = `native-bindings: no ucx backend in ${transport.libraryPath} (${transport.capabilities().backendsDetail})`;
  if (inCi) console.error(`${message}; CI requires it, so the ucx tests will FAIL`);
  else
    console.warn(`${message}; its tests are SKIPPED here (install libucx-dev, and rebuild if it was built without it)`);
}

let sequence = 0;
/** A process-unique agent name. */
export function agentName(label: string): string {
  sequence += 1;
  return `${label}-${process.pid}-${sequence}`;
}
