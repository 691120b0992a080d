#!/usr/bin/env node
// One entry point for a fresh machine that has only Node and npm:
//   node scripts/dev.mjs test   install everything, then typecheck, lint and run every test
//   node scripts/dev.mjs demo   install everything, build, run the main job
//   node scripts/dev.mjs bench  install everything, build, run every benchmark and merge the figures
// It installs the system packages the native layer and the tests need (UCX, etcd, valgrind) with apt
// when it runs as root on Debian, pins pnpm through npx, and installs from the frozen lockfile.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const task = process.argv[2];
const tasks = { test: runTests, demo: runDemo, bench: runBench };
if (!(task in tasks)) {
  console.error(`usage: node scripts/dev.mjs ${Object.keys(tasks).join('|')} (got ${JSON.stringify(task)})`);
  process.exit(2);
}

const env = { ...process.env, TURBO_TELEMETRY_DISABLED: '1', DO_NOT_TRACK: '1', TURBO_NO_UPDATE_NOTIFIER: '1' };

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: 'inherit', cwd: root, env, ...options });
  if (result.error) {
    console.error(`kvreuse: could not start ${command}: ${result.error.message}`);
    process.exit(1);
  }
  if (result.status !== 0) {
    console.error(`kvreuse: ${[command, ...args].join(' ')} exited with ${result.status ?? result.signal}`);
    process.exit(result.status ?? 1);
  }
}

function commandExists(command) {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

// Debian packages, each with the probe that says it is already there.
const systemPackages = [
  { name: 'libucx-dev', present: () => existsSync('/usr/include/ucp/api/ucp.h') },
  { name: 'ucx-utils', present: () => commandExists('ucx_perftest') },
  { name: 'etcd-server', present: () => commandExists('etcd') },
  { name: 'valgrind', present: () => commandExists('valgrind') },
  { name: 'build-essential', present: () => commandExists('cc') && commandExists('make') },
];

function ensureSystemPackages() {
  const missing = systemPackages.filter((p) => !p.present()).map((p) => p.name);
  if (missing.length === 0) return;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (isRoot && commandExists('apt-get')) {
    console.log(`kvreuse: installing Debian packages: ${missing.join(' ')}`);
    const aptEnv = { ...env, DEBIAN_FRONTEND: 'noninteractive' };
    run('apt-get', ['update', '-qq'], { env: aptEnv });
    run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { env: aptEnv });
    return;
  }
  const command = `sudo apt-get update && sudo apt-get install -y ${missing.join(' ')}`;
  console.warn(`kvreuse: missing system packages: ${missing.join(', ')}.\n  Install them with: ${command}`);
  console.warn('  Without UCX only the loopback transport is built; without etcd the etcd discovery tests fail.');
}

function pnpmCommand() {
  const pinned = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).packageManager;
  const version = pinned.replace(/^pnpm@/, '');
  const local = spawnSync('pnpm', ['--version'], { encoding: 'utf8', env });
  if (local.status === 0 && local.stdout.trim() === version) return ['pnpm'];
  return ['npx', '-y', `pnpm@${version}`];
}

function pnpm(args) {
  const [command, ...prefix] = pnpmCommand();
  run(command, [...prefix, ...args]);
}

function install() {
  ensureSystemPackages();
  pnpm(['install', '--frozen-lockfile', '--reporter=append-only']);
}

function runTests() {
  install();
  const resultsDir = join(root, '.test-results');
  rmSync(resultsDir, { recursive: true, force: true });
  // --force: a cached "test" would replay old output without running anything. One task at a time:
  // the process tests (UCX pulls, leases, killed peers) then have the machine's two cores to themselves.
  pnpm(['exec', 'turbo', 'run', 'build', 'typecheck', 'lint', 'test', '--concurrency=1', '--output-logs=full', '--force', '--continue']);
  printTestTotals(resultsDir);
}

// Every package's vitest writes a JSON report; one closing line says what the whole run did.
function printTestTotals(resultsDir) {
  const reports = existsSync(resultsDir) ? readdirSync(resultsDir).filter((f) => f.endsWith('.json')) : [];
  const totals = { passed: 0, failed: 0, skipped: 0 };
  for (const file of reports) {
    const report = JSON.parse(readFileSync(join(resultsDir, file), 'utf8'));
    totals.passed += report.numPassedTests;
    totals.failed += report.numFailedTests;
    totals.skipped += report.numPendingTests + (report.numTodoTests ?? 0);
  }
  console.log(`\nkvreuse: ${reports.length} test projects`);
  console.log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
  if (reports.length === 0 || totals.passed === 0 || totals.failed > 0) process.exit(1);
}

function runDemo() {
  install();
  pnpm(['exec', 'turbo', 'run', 'build', '--output-logs=errors-only']);
  pnpm(['--filter', '@kvreuse-internal/demo', 'run', 'demo']);
}

function runBench() {
  install();
  pnpm(['exec', 'turbo', 'run', 'bench', '--concurrency=1', '--output-logs=full']);
  run(process.execPath, [join(root, 'scripts/merge-bench.mjs')]);
}

tasks[task]();
