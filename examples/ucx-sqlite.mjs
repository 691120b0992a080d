// Example 2: a decode worker and a prefill worker as two OS processes, moving KV blocks over UCX, with
// discovery in an SQLite file that both open. This program is the prefill worker; it starts the decode
// worker as a child process (this same file, run as `ucx-sqlite.mjs decode <discovery file>`), learns
// from discovery when that worker is ready, pulls the prefix it retains, verifies it, and stops both.
//
//   node examples/ucx-sqlite.mjs
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openClusterSecret, openSqliteDiscovery, watchWorkerReadiness } from '@kvreuse/discovery';
import {
  blockHashes,
  conversation,
  describePull,
  openWorker,
  pull,
  pullHint,
  retain,
  settings,
  stop,
  whenReady,
} from './kv-worker.mjs';

const retainedBlocks = 6;
const [half, discoveryFile] = process.argv.slice(2);
if (half === 'decode') await runDecode(discoveryFile);
else await runPrefill();

/** The child: retains turn 1's blocks and serves them until SIGTERM, then drains (waiting for readers' pins) and exits. */
async function runDecode(path) {
  const discovery = openSqliteDiscovery(path);
  // Both processes sign with the cluster secret beside the SQLite file (created by whichever comes first).
  const secret = openClusterSecret({ ...settings.discovery, sqlitePath: path });
  const decode = await openWorker({
    workerId: 'decode-0',
    role: 'decode',
    backend: 'ucx',
    discovery,
    secret,
    serve: true,
  });
  retain(decode, blockHashes(conversation(retainedBlocks)));
  await whenReady(decode);
  console.log(`decode-0 ready in process ${process.pid}`);
  const alive = setInterval(() => {}, 60_000); // the served agent works on its own thread: keep this process up
  await new Promise((resolve) => process.once('SIGTERM', resolve));
  clearInterval(alive);
  console.log(await stop(decode));
  await discovery.close();
}

/** The parent: the prefill worker. */
async function runPrefill() {
  const directory = mkdtempSync(join(tmpdir(), 'kvreuse-example-'));
  const discovery = openSqliteDiscovery(join(directory, 'discovery.sqlite'));
  const secret = openClusterSecret({ ...settings.discovery, sqlitePath: join(directory, 'discovery.sqlite') });
  const child = spawn(
    process.execPath,
    [fileURLToPath(import.meta.url), 'decode', join(directory, 'discovery.sqlite')],
    { stdio: 'inherit' },
  );
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  try {
    // Discovery says when decode-0 is ready, and which incarnation and epoch a pull must name.
    let sourceReady;
    const ready = new Promise((resolve) => (sourceReady = resolve));
    const watch = await watchWorkerReadiness(discovery, 'decode-0', {
      onChange: (readiness) => readiness.ready && sourceReady(readiness),
    });
    const gone = exited.then((end) =>
      Promise.reject(new Error(`the decode process ended (${end}) before it was ready`)),
    );
    const source = await Promise.race([ready, gone]);
    await watch.close();

    const prefill = await openWorker({ workerId: 'prefill-0', role: 'prefill', backend: 'ucx', discovery, secret });
    await whenReady(prefill);
    console.log(
      `prefill-0 ready in process ${process.pid}; decode-0 is incarnation ${source.incarnation} at epoch ${source.epoch}`,
    );

    // Turn 2 repeats turn 1 and adds a block: its first blocks hash to what decode-0 retains.
    const turn2 = conversation(retainedBlocks + 1);
    const prefix = blockHashes(turn2).subarray(0, retainedBlocks);
    const pulled = await pull(prefill, pullHint(source, prefix, 'same-host'));
    console.log(`prefill-0 ${describePull(pulled)}`);

    // The reader stops first; then SIGTERM tells the decode process to drain and exit.
    console.log(await stop(prefill));
    child.kill('SIGTERM');
    const end = await exited;
    console.log(`decode process exited with ${end}`);
    process.exitCode =
      pulled.receipt.blocks === prefix.length && pulled.matching === prefix.length && end === 0 ? 0 : 1;
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await discovery.close();
    rmSync(directory, { recursive: true, force: true });
  }
}
