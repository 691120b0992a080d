// Composes the GPU check's results file from what run.sh collected in its work folder: the machine, the
// native tests, the figures against their goals (issue 31), the facade's probe; `pass` says whether all
// passed. Run by run.sh with the shipped Node.
//   node results.mjs <work folder> <results file>
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [work, out] = process.argv.slice(2);
const read = (name) => (existsSync(join(work, name)) ? readFileSync(join(work, name), 'utf8') : '');
const rc = (name) => Number(read(`${name}.rc`).trim() || -1);
const json = (name) => {
  try {
    return JSON.parse(read(name));
  } catch {
    return null;
  }
};
const tail = (text) => text.split('\n').slice(-40).join('\n');

const nativeRun = (backend) => {
  const log = read(`native-${backend}.log`);
  return {
    rc: rc(`native-${backend}`),
    passed: (log.match(/^ok /gm) ?? []).length,
    skipped: (log.match(/^skip /gm) ?? []).length,
    failed: (log.match(/^FAIL /gm) ?? []).length,
    log: tail(log),
  };
};
const native = { loopback: nativeRun('loopback'), ucx: nativeRun('ucx') };
const nativePassed = Object.values(native).every((run) => run.rc === 0 && run.failed === 0 && run.passed > 0);
const figures = json('figures.json');
const ratios = figures?.ratios ?? {};
const pulls = figures?.pull_ratios ?? {};
// Issue 31's bars that this check measures (the staged pull and the whole fetch are not in it yet), and the
// driver's own path and the kernels beside them.
const goals = {
  'pull.vram_ipc.qwen3_42blocks.vs_d2d >= 0.9': (pulls.pull_42_vs_d2d ?? 0) >= 0.9,
  'pull.vram_ipc.pieces_2352.vs_d2d >= 0.85': (pulls.pull_2352_vs_d2d ?? 0) >= 0.85,
  'pull.vram_ipc.pieces_9408.vs_d2d >= 0.85': (pulls.pull_9408_vs_d2d ?? 0) >= 0.85,
  'ipc_copy_vs_d2d >= 0.9': (ratios.ipc_copy_vs_d2d ?? 0) >= 0.9,
  'ipc_gather_2352_vs_d2d >= 0.85': (ratios.ipc_gather_2352_vs_d2d ?? 0) >= 0.85,
  'gather_2352_vs_d2d >= 0.85': (ratios.gather_2352_vs_d2d ?? 0) >= 0.85,
  'gather_9408_vs_d2d >= 0.85': (ratios.gather_9408_vs_d2d ?? 0) >= 0.85,
  'verify_gbytes_per_s >= 1000': (figures?.verify_gbytes_per_s ?? 0) >= 1000,
};
const probe = json('probe.json');
const probePassed =
  rc('probe') === 0 &&
  probe?.vram?.supported === true &&
  probe?.region?.kind === 'vram' &&
  probe?.hostAsVram?.code === 'INVALID_PARAM';
const results = {
  date: new Date().toISOString(),
  machine: { gpus: read('gpus.txt').trim(), nvidia_smi_rc: rc('gpus') },
  native_tests: native,
  figures: figures ?? { rc: rc('figures'), stdout: read('figures.json'), stderr: tail(read('figures.err')) },
  goals,
  probe: probe ?? { rc: rc('probe'), stderr: tail(read('probe.err')) },
  pass: nativePassed && figures !== null && Object.values(goals).every(Boolean) && probePassed,
};
writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
console.log(`gpu-check: ${results.pass ? 'PASS' : 'FAIL'}; results in ${out}`);
process.exit(results.pass ? 0 : 1);
