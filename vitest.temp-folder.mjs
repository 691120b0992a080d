// A test run's temporary folder is one of its own, and must be empty when the run ends: vitest's
// globalSetup makes it the TMPDIR of the run (its workers, and the processes they start, inherit it),
// then fails the run (status 1) naming whatever a test left there. Other processes of the machine write to the
// shared temporary folder meanwhile; this one only the run writes to, so the check is deterministic.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/** Set while a run's own temporary folder is TMPDIR: the projects of one run share it. */
const owned = 'KVREUSE_TEST_TMPDIR';

export default function setup() {
  if (process.env[owned] !== undefined) return undefined;
  const shared = process.env.TMPDIR;
  const dir = mkdtempSync(join(tmpdir(), 'kvreuse-test-run-'));
  // tsx, which runs the rank processes from source, keeps its compile cache at <TMPDIR>/tsx-<uid>: the
  // machine's, linked in before the run, so that it is neither rebuilt each run nor taken for a leftover.
  const tsxCache = `tsx-${process.geteuid?.() ?? userInfo().username}`;
  mkdirSync(join(tmpdir(), tsxCache), { recursive: true });
  symlinkSync(join(tmpdir(), tsxCache), join(dir, tsxCache));
  const before = new Set(readdirSync(dir));
  process.env.TMPDIR = dir;
  process.env[owned] = dir;
  return () => {
    const left = readdirSync(dir).filter((name) => !before.has(name));
    rmSync(dir, { recursive: true, force: true });
    if (shared === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = shared;
    delete process.env[owned];
    if (left.length === 0) return;
    // Thrown from a teardown, an error is printed but leaves the run's status 0: the status is set here.
    console.error(`the tests left ${left.length} entries in their temporary folder: ${left.sort().join(', ')}`);
    process.exitCode = 1;
  };
}
