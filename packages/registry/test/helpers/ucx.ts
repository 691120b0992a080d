import { loadTransport } from '@kvreuse/native-bindings';

/** CI (`.ci/run` sets CI=1) runs every test: a missing UCX backend fails the UCX tests instead of skipping them. */
const inCi = process.env['CI'] !== undefined && !['', '0', 'false'].includes(process.env['CI']);

const ucxBuilt = loadTransport().capabilities().backends.includes('ucx');

/** Whether the tests that need the ucx backend run here (without it, CI makes them fail with the library's reason). */
export const ucxTestsRun = ucxBuilt || inCi;

if (!ucxBuilt) {
  if (inCi) console.error('registry: the ucx backend is not built; CI requires it, so the ucx tests will FAIL');
  else
    console.warn('registry: the ucx backend is not built; its tests are SKIPPED here (install libucx-dev and rebuild)');
}
