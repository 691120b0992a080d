// Composes the GPU check's results file from what run.sh collected in its work folder: the machine, then
// one entry per check and per figure of issue 31, each with `pass` and what it found; `pass` at the top
// says whether all passed. Without a GPU (gpu_figures preflight refused) nothing ran: the file says why and
// every check is reported as not run. Run by run.sh with the shipped Node.
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
const tail = (text, lines = 40) => text.split('\n').slice(-lines).join('\n');

/**
 * gpu_figures' output: a JSON object per line, a line per group of figures as it was measured, merged into one
 * (their `ratios` and `pull_ratios` too); `error` from the line that ended them early, if one did. Null when
 * no line parsed.
 */
function gpuFigures() {
  const lines = read('figures.json')
    .split('\n')
    .map((line) => {
      try {
        return JSON.parse(line);
      } catch {
        return null;
      }
    })
    .filter((line) => line !== null && typeof line === 'object');
  if (lines.length === 0) return null;
  const merged = {};
  for (const line of lines)
    for (const [key, value] of Object.entries(line)) {
      if (key === 'ratios' || key === 'pull_ratios') merged[key] = { ...merged[key], ...value };
      else if (!(key === 'error' && 'error' in merged)) merged[key] = value;
    }
  return merged;
}

/** test_cuda's run on one backend: its exit status and its lines counted. */
function nativeRun(backend) {
  const log = read(`native-${backend}.log`);
  const count = (word) => (log.match(new RegExp(`^${word} `, 'gm')) ?? []).length;
  const [passed, skipped, failed] = [count('ok'), count('skip'), count('FAIL')];
  return {
    pass: rc(`native-${backend}`) === 0 && failed === 0 && passed > 0,
    rc: rc(`native-${backend}`),
    passed,
    skipped,
    failed,
    log: tail(log),
  };
}

/**
 * Whether the case `name` of a native suite passed on the ucx backend (a pull between two processes needs
 * ucx): test_cuda's (its log native-ucx.log), or another suite's, run as its own part (`suite`-ucx.log).
 */
function nativeCase(name, what, suite = 'cuda') {
  const log = read(suite === 'cuda' ? 'native-ucx.log' : `${suite}-ucx.log`);
  if (new RegExp(`^ok ${suite}/${name} \\[ucx\\]$`, 'm').test(log)) return { pass: true, case: name, detail: what };
  const line = log
    .split('\n')
    .find((entry) => entry.includes(` ${suite}/${name} [ucx]`) || entry.includes(`FAIL ${name} [ucx]`));
  return {
    pass: false,
    case: name,
    detail: line ?? `test_${suite} ran no case ${name} on ucx: ${what} is not in this build`,
  };
}

/** A figure held to its goal (`at least` or `at most`; none: reported only), or missing with the reason. */
function figure(value, goal, detail, missing) {
  if (typeof value !== 'number' || !Number.isFinite(value)) return { pass: false, value: null, goal, detail: missing };
  if (goal === null) return { pass: true, value: Number(value.toFixed(3)), goal, detail };
  const [bound, limit] = goal;
  return {
    pass: bound === 'at least' ? value >= limit : value <= limit,
    value: Number(value.toFixed(3)),
    goal,
    detail,
  };
}

/** The main job with vram banks: `kvreuse demo -o json`, its summary. */
function mainJob() {
  const summary = json('demo.json');
  if (summary === null)
    return { pass: false, rc: rc('demo'), detail: 'the demo wrote no summary', stderr: tail(read('demo.err'), 20) };
  const memory = summary.pull?.memory ?? 'dram';
  const pass = rc('demo') === 0 && summary.gpu?.active === true && summary.pull?.verified === true && memory === 'vram';
  return {
    pass,
    rc: rc('demo'),
    gpu: summary.gpu,
    pull: summary.pull,
    killedRank: summary.killedRank,
    detail: pass
      ? 'gpu reuse active, the 42-block pull between vram banks verified'
      : `gpu reuse ${summary.gpu?.active ? 'active' : `refused: ${summary.gpu?.reason}`}; the pull ${summary.pull?.verified ? 'verified' : 'not verified'}, its banks ${memory}`,
    ...(pass ? {} : { stderr: tail(read('demo.err'), 30) }),
  };
}

/** What the hardware allows the library, beside the issue's figures: [name, gpu_figures ratio, bar, what]. */
const hardwareFigures = [
  ['driver.ipc_copy.vs_d2d', 'ipc_copy_vs_d2d', 0.9, "the driver's one copy out of another process's IPC handle"],
  [
    'driver.ipc_gather_2352.vs_d2d',
    'ipc_gather_2352_vs_d2d',
    0.85,
    "the gather kernel out of another process's IPC handle, 2,352 pieces",
  ],
  ['kernel.gather_2352.vs_d2d', 'gather_2352_vs_d2d', 0.85, 'the gather kernel within the process, 2,352 pieces'],
  ['kernel.gather_9408.vs_d2d', 'gather_9408_vs_d2d', 0.85, 'the gather kernel within the process, 9,408 pieces'],
  [
    'kernel.gather_routes_2352.vs_d2d',
    'gather_routes_2352_vs_d2d',
    0.85,
    'the route gather kernel alone within the process, 42 blocks of 56 routes of 128 KiB',
  ],
  [
    'kernel.gather_routes_9408.vs_d2d',
    'gather_routes_9408_vs_d2d',
    0.85,
    'the route gather kernel alone within the process, 168 blocks of 56 routes of 32 KiB',
  ],
];

/** Issue 31's figures from gpu_figures (one process pair) and fetch.mjs (the whole fetch); the demo's recompute estimate. */
function figures(measured, job, fetched) {
  const pulls = measured?.pull_ratios ?? {};
  const notMeasured =
    measured === null
      ? 'gpu_figures reported no figures'
      : measured.error === undefined
        ? 'gpu_figures did not report it'
        : `gpu_figures stopped before it: ${measured.error}`;
  // Many pieces are what a template post moves (a route per layer and K/V plane of each block), expanded on
  // the GPU; the same pieces posted as descriptors, one each, are reported beside them.
  const pieces = Math.min(pulls.template_pull_2352_vs_d2d ?? NaN, pulls.template_pull_9408_vs_d2d ?? NaN);
  const staged = measured?.staged_pull_ms === undefined ? NaN : measured.pinned_h2d_ms / measured.staged_pull_ms;
  return {
    'pull.vram_ipc.qwen3_42blocks.vs_d2d': {
      ...figure(
        pulls.pull_42_vs_d2d,
        ['at least', 0.9],
        'library pull of 42 blocks from another process against one d2d copy',
        notMeasured,
      ),
      // What a vram pull costs beside its bytes (one 4 KiB piece, post to completion): a miss's fixed share.
      fixed_cost_ms: measured?.pull_1x4KiB_ms ?? null,
    },
    'pull.vram_ipc.pieces.vs_d2d': {
      ...figure(
        pieces,
        ['at least', 0.85],
        'the lower of 2,352 pieces of 128 KiB (42 blocks) and 9,408 of 32 KiB (168 blocks), 56 routes a block, posted by template',
        notMeasured,
      ),
      pieces_2352: pulls.template_pull_2352_vs_d2d ?? null,
      pieces_9408: pulls.template_pull_9408_vs_d2d ?? null,
      descriptors_2352: pulls.pull_2352_vs_d2d ?? null,
      descriptors_9408: pulls.pull_9408_vs_d2d ?? null,
    },
    'pull.vram_staged.qwen3_42blocks.vs_pinned_h2d': {
      ...figure(
        staged,
        ['at least', 0.8],
        'host-staged pull between two processes against one pinned host-to-device copy',
        measured === null || measured.error !== undefined
          ? notMeasured
          : 'not measured: gpu_figures reported no staged_pull_ms',
      ),
      // Where a staged pull's time goes: its two copies by the GPU, each alone; the rest is the link.
      staged_pull_ms: measured?.staged_pull_ms ?? null,
      // The share of its bytes the source wrote into the reader's bounce buffers in place (1: none crossed UCX).
      in_place_share: measured?.staged_in_place_share ?? null,
      // The same prefix as 2,352 pieces, 32 to a chunk, packed and unpacked by a gather launch on each side.
      pieces_2352_vs_pinned_h2d:
        measured?.staged_pull_2352x128KiB_ms === undefined
          ? null
          : measured.pinned_h2d_ms / measured.staged_pull_2352x128KiB_ms,
      pinned_h2d_ms: measured?.pinned_h2d_ms ?? null,
      pinned_d2h_ms: measured?.pinned_d2h_ms ?? null,
    },
    'verify.gpu.gbytes_per_s': {
      ...figure(
        Math.min(measured?.verify_gbytes_per_s ?? NaN, measured?.verify_grouped_rows_gbytes_per_s ?? NaN),
        ['at least', 1000],
        'the route checksum kernel over the prefix as 42 blocks of 56 routes, as a verification sums them: the lower of routes of one row of 128 KiB and of four rows of 32 KiB',
        notMeasured,
      ),
      one_row_gbytes_per_s: measured?.verify_gbytes_per_s ?? null,
      grouped_rows_gbytes_per_s: measured?.verify_grouped_rows_gbytes_per_s ?? null,
      pieces_gbytes_per_s: measured?.verify_pieces_gbytes_per_s ?? null,
    },
    'fetch.vram_ipc.qwen3_42blocks.ms': {
      ...figure(
        fetched?.ms_mean,
        ['at most', 2],
        'the whole fetch through the endpoints between two processes (pin round trip, transfer through CUDA IPC, verification on the GPU), the mean of its repeats',
        'not measured: fetch.mjs reported nothing',
      ),
      recompute_estimate_ms: job.decisions?.find((decision) => decision.request === 'turn 2')?.savingMs ?? null,
      phases_mean_ms: fetched?.phases_mean_ms ?? null,
    },
    ...Object.fromEntries(
      hardwareFigures.map(([name, ratio, bar, detail]) => [
        name,
        figure(measured?.ratios?.[ratio], ['at least', bar], detail, notMeasured),
      ]),
    ),
  };
}

/** The whole fetch between vram banks through the endpoints of two processes (fetch.mjs): every block pulled and verified in full. */
function fetchCheck() {
  const fetched = json('fetch.json');
  if (fetched === null) return { pass: false, rc: rc('fetch'), stderr: tail(read('fetch.err'), 30) };
  const pass =
    rc('fetch') === 0 &&
    fetched.blocks === 42 &&
    fetched.checkedBlocks === 42 &&
    fetched.verify === 'full' &&
    fetched.reasons?.length === 0;
  return { pass, ...fetched };
}

function probeCheck() {
  const probe = json('probe.json');
  const pass =
    rc('probe') === 0 &&
    probe?.vram?.supported === true &&
    probe?.region?.kind === 'vram' &&
    probe?.hostAsVram?.code === 'INVALID_PARAM' &&
    probe?.templatePull?.checksumsAgree === true &&
    probe?.templatePull?.bytes > 0 &&
    probe?.templatePull?.bytes === probe?.templatePull?.planned;
  return probe === null ? { pass, rc: rc('probe'), stderr: tail(read('probe.err')) } : { pass, ...probe };
}

const preflight = json('preflight.json');
const machine = { gpus: read('gpus.txt').trim(), nvidia_smi_rc: rc('gpus'), driver: preflight };
const checkNames = [
  'native.loopback',
  'native.ucx',
  'pull.ipc.two_processes',
  'pull.staged.two_processes',
  'pull.staged.in_place',
  'vram.free_waits_for_readers',
  'vram.one_mapping_per_allocation',
  'sidecar.vram_import',
  'pull.ipc.templates',
  'pull.ipc.large_descriptors',
  'verify.gpu.routes',
  'endpoint.vram_fetch',
  'main_job.vram',
  'probe',
];
let results;
if (rc('preflight') !== 0) {
  const reason = `no GPU: ${preflight?.reason || tail(read('preflight.json'), 5) || 'gpu_figures preflight failed'}`;
  const notRun = { pass: false, detail: `not run: ${reason}` };
  const allNotRun = (names) => Object.fromEntries(names.map((name) => [name, notRun]));
  const figureNames = Object.keys(figures(null, {}, null));
  results = {
    date: new Date().toISOString(),
    machine,
    no_gpu: reason,
    checks: allNotRun(checkNames),
    figures: allNotRun(figureNames),
    pass: false,
  };
} else {
  const measured = gpuFigures();
  const job = json('demo.json') ?? {};
  const checks = {
    'native.loopback': nativeRun('loopback'),
    'native.ucx': nativeRun('ucx'),
    'pull.ipc.two_processes': nativeCase(
      'vram_pull_from_another_process',
      'a vram pull from another process through CUDA IPC',
    ),
    'pull.staged.two_processes': nativeCase(
      'vram_staged_pull_from_another_process',
      'a host-staged vram pull from another process',
    ),
    'pull.staged.in_place': nativeCase(
      'staged_chunks_are_written_in_place',
      "host-staged chunks from another process of this host written in place into the reader's bounce buffer, every byte checked",
      'staged_in_place',
    ),
    'vram.free_waits_for_readers': nativeCase(
      'an_owners_free_waits_for_its_readers',
      "an owner's free of its vram waiting until the reader processes that have it open through CUDA IPC closed it or were killed",
      'vram_withdrawn',
    ),
    'vram.one_mapping_per_allocation': nativeCase(
      'halves_of_one_allocation_share_its_mapping',
      "two regions of one allocation pulled by a reader process through the one mapping the driver gives both, the second still pulled once the first was withdrawn, and the owner's free once the reader closed it",
      'vram_withdrawn',
    ),
    'sidecar.vram_import': nativeCase(
      'engine_memory_served',
      "another process's vram opened by its IPC handle, registered and pulled by a third process",
      'vram_import',
    ),
    'pull.ipc.templates': nativeCase(
      'routes_of_every_shape',
      'template posts between vram banks expanded on the GPU, routes of every shape, every byte checked',
      'vram_routes',
    ),
    'pull.ipc.large_descriptors': nativeCase(
      'large_descriptors_cut_on_the_gpu',
      'descriptor posts of large pieces cut into tiles on the GPU, every byte checked',
      'vram_routes',
    ),
    'verify.gpu.routes': nativeCase(
      'checksums_by_routes',
      "block checksums by a template's routes on the GPU, equal to the same rows summed one by one and on the host",
      'vram_routes',
    ),
    'endpoint.vram_fetch': fetchCheck(),
    'main_job.vram': mainJob(),
    probe: probeCheck(),
  };
  const figureResults = figures(measured, job, json('fetch.json'));
  results = {
    date: new Date().toISOString(),
    machine,
    checks,
    figures: figureResults,
    gpu_figures:
      measured === null
        ? { rc: rc('figures'), stdout: read('figures.json'), stderr: tail(read('figures.err')) }
        : measured.error === undefined
          ? measured
          : { ...measured, rc: rc('figures'), stderr: tail(read('figures.err')) },
    pass: [...Object.values(checks), ...Object.values(figureResults)].every((entry) => entry.pass),
  };
}
writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
const failed = [...Object.entries(results.checks), ...Object.entries(results.figures ?? {})].filter(
  ([, entry]) => !entry.pass,
);
console.log(
  results.no_gpu !== undefined
    ? `gpu-check: ${results.no_gpu}; nothing ran; results in ${out}`
    : `gpu-check: ${results.pass ? 'PASS' : `FAIL (${failed.map(([name]) => name).join(', ')})`}; results in ${out}`,
);
process.exit(results.pass ? 0 : results.no_gpu !== undefined ? 2 : 1);
