#!/usr/bin/env node
// One entry point for a fresh machine that has only Node and npm:
//   node scripts/dev.mjs test   install everything, then typecheck, lint and run every test
//   node scripts/dev.mjs demo   install everything, build, run the main job (`kvreuse demo`; later
//                               arguments go to it: npm run demo -- --json)
//   node scripts/dev.mjs bench  install everything, build, run every benchmark and merge the figures
//                               (--write-docs: also into the table of docs/benchmarks.md)
// It installs the system packages the task needs with apt when it runs as root on Debian — for the demo
// only UCX's headers and a C compiler; for the tests and benchmarks also etcd, valgrind, clang, the arm64
// cross compiler and qemu-user —, pins pnpm through npx, and installs from the frozen lockfile.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { runQueue, startOrder } from './test-queue.mjs';
import { readReports, testProjects, testTotals, totalsLine } from './test-totals.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const task = process.argv[2];
const tasks = { test: runTests, demo: runDemo, bench: runBench };
if (!(task in tasks)) {
  console.error(`usage: node scripts/dev.mjs ${Object.keys(tasks).join('|')} (got ${JSON.stringify(task)})`);
  process.exit(2);
}

const env = { ...process.env, TURBO_TELEMETRY_DISABLED: '1', DO_NOT_TRACK: '1', TURBO_NO_UPDATE_NOTIFIER: '1' };

/** Runs a command to its end; returns its exit status (a signal's name if it was killed). */
function runToEnd(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: 'inherit', cwd: root, env, ...options });
  if (result.error) {
    console.error(`kvreuse: could not start ${command}: ${result.error.message}`);
    process.exit(1);
  }
  if (result.status !== 0)
    console.error(`kvreuse: ${[command, ...args].join(' ')} exited with ${result.status ?? result.signal}`);
  return result.status ?? result.signal;
}

/** Runs a command; exits this script when the command fails. */
function run(command, args, options = {}) {
  const status = runToEnd(command, args, options);
  if (status !== 0) process.exit(typeof status === 'number' ? status : 1);
}

function commandExists(command) {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

// Debian packages, each with the probe that says it is already there. `demo: true`: the main job needs it
// (the native library built with UCX); the others only the tests and benchmarks.
const systemPackages = [
  { name: 'libucx-dev', demo: true, present: () => existsSync('/usr/include/ucp/api/ucp.h') },
  { name: 'ucx-utils', present: () => commandExists('ucx_perftest') },
  { name: 'etcd-server', present: () => commandExists('etcd') },
  // The secured-etcd tests make their certificates with it.
  { name: 'openssl', present: () => commandExists('openssl') },
  { name: 'valgrind', present: () => commandExists('valgrind') },
  {
    name: 'build-essential',
    demo: true,
    // c++: the tests' fake CUDA driver runs the library's kernels compiled for the host.
    present: () => commandExists('cc') && commandExists('c++') && commandExists('make'),
  },
  // The platform packages' libraries: @kvreuse/native-linux-arm64-gnu is cross-built, and its test runs
  // it under qemu-user.
  { name: 'gcc-aarch64-linux-gnu', present: () => commandExists('aarch64-linux-gnu-gcc') },
  { name: 'libc6-dev-arm64-cross', present: () => existsSync('/usr/aarch64-linux-gnu/include/stdio.h') },
  { name: 'qemu-user', present: () => commandExists('qemu-aarch64') },
  // clang and libFuzzer's runtime, for the native fuzz targets (`make -C native fuzz`).
  { name: 'clang', present: () => commandExists('clang') || commandExists('clang-14') },
  {
    name: 'libclang-rt-14-dev',
    present: () =>
      spawnSync('sh', ['-c', 'ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a'], { stdio: 'ignore' })
        .status === 0,
  },
  // The native sources' formatting check (`make -C native format-check`, part of its `make test`).
  { name: 'clang-format', present: () => commandExists('clang-format') },
];

function ensureSystemPackages({ demoOnly = false } = {}) {
  const missing = systemPackages.filter((p) => (!demoOnly || p.demo) && !p.present()).map((p) => p.name);
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
  console.warn(
    demoOnly
      ? '  Without UCX only the loopback transport is built: run the demo with --backend loopback.'
      : '  Without UCX only the loopback transport is built; without etcd the etcd discovery tests fail.',
  );
}

function pnpmCommand() {
  const pinned = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).packageManager;
  const version = pinned.replace(/^pnpm@/, '');
  const local = spawnSync('pnpm', ['--version'], { encoding: 'utf8', env });
  if (local.status === 0 && local.stdout.trim() === version) return ['pnpm'];
  return ['npx', '-y', `pnpm@${version}`];
}

function pnpm(args, options) {
  const [command, ...prefix] = pnpmCommand();
  run(command, [...prefix, ...args], options);
}

function pnpmToEnd(args) {
  const [command, ...prefix] = pnpmCommand();
  return runToEnd(command, [...prefix, ...args]);
}

function install({ demoOnly = false } = {}) {
  ensureSystemPackages({ demoOnly });
  pnpm(['install', '--frozen-lockfile', '--reporter=append-only'], demoOnly ? { stdio: toStderr } : {});
}

async function runTests() {
  install();
  const resultsDir = join(root, '.test-results');
  rmSync(resultsDir, { recursive: true, force: true });
  // --force: a cached task would replay old output without running anything. Everything runs two
  // tasks at a time on the two cores: most test time is spent waiting on other processes (rank
  // processes, etcd, npm, valgrind), and no test asserts on timing, so two projects side by side halve
  // the suite's length without making it any less strict.
  // --continue=dependencies-successful: every task runs whatever else failed, except tasks whose own
  // build failed.
  const checked = pnpmToEnd([
    'exec',
    'turbo',
    'run',
    'build',
    'typecheck',
    'lint',
    '--concurrency=2',
    '--output-logs=full',
    '--force',
    '--continue=dependencies-successful',
  ]);
  // The tests, two projects at a time as well, whatever failed before them: not through turbo, which
  // starts them in an order of its own; here the longest start first (scripts/test-queue.mjs).
  const folders = new Map(testProjects(root).map((folder) => [basename(folder), folder]));
  const testTasks = await runQueue(startOrder([...folders.keys()]), 2, (project) =>
    runTestScript(folders.get(project)),
  );
  const passed = printTestTotals(resultsDir, testTasks);
  process.exit(checked === 0 && testTasks.every((task) => task.exitCode === 0) && passed ? 0 : 1);
}

/**
 * Runs the `test` script of the package in `folder`; each line it prints goes out behind
 * `<package>:test: `, as turbo prints it, and a last line says how it ended and after how long.
 * Resolves to its exit status (a signal's name if it was killed, the error's code if it did not start).
 */
function runTestScript(folder) {
  const { name } = JSON.parse(readFileSync(join(root, folder, 'package.json'), 'utf8'));
  const started = performance.now();
  const [command, ...prefix] = pnpmCommand();
  const child = spawn(command, [...prefix, 'run', 'test'], {
    cwd: join(root, folder),
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ]) {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => out.write(`${name}:test: ${line}\n`));
  }
  return new Promise((resolve) => {
    child.once('error', (error) => resolve(error.code ?? error.message));
    child.once('close', (status, signal) => {
      const seconds = Math.round((performance.now() - started) / 1000);
      console.log(`kvreuse: ${name}: test exited with ${status ?? signal} after ${seconds} s`);
      resolve(status ?? signal);
    });
  });
}

// Every package's vitest writes a JSON report; one closing line says what the whole run did. It is
// printed whatever failed before it.
function printTestTotals(resultsDir, testTasks) {
  const reports = readReports(resultsDir);
  const totals = testTotals(reports, testTasks);
  console.log(`\nkvreuse: ${reports.size} test projects reported`);
  // The failures again at the end, where a reader of the log's tail sees them.
  for (const failure of totals.failures) console.log(`kvreuse: failed: ${failure}`);
  for (const problem of totals.problems) console.log(`kvreuse: counted as failed: ${problem}`);
  console.log(totalsLine(totals));
  return totals.passed > 0 && totals.failed === 0;
}

// What the demo's setup prints goes to stderr: stdout is the demo's own (`npm run demo -- --json | jq .`).
const toStderr = ['inherit', 2, 2];

// The platform package of the other cpu is cross-built: the demo builds only this machine's.
const otherPlatform = process.arch === 'arm64' ? '@kvreuse/native-linux-x64-gnu' : '@kvreuse/native-linux-arm64-gnu';

function runDemo() {
  install({ demoOnly: true });
  // The cli and what it needs, in dependency order; not the other cpu's library, not the tools.
  pnpm(['--recursive', '--filter', '@kvreuse/cli...', '--filter', `!${otherPlatform}`, 'run', 'build'], {
    stdio: toStderr,
  });
  run(process.execPath, [join(root, 'packages/cli/dist/bin.js'), 'demo', ...process.argv.slice(3)]);
}

function runBench() {
  install();
  pnpm(['exec', 'turbo', 'run', 'bench', '--concurrency=1', '--output-logs=full']);
  run(process.execPath, [join(root, 'scripts/merge-bench.mjs'), ...process.argv.slice(3)]);
}

await tasks[task]();
