// tools/gpu-check/results.mjs composes the GPU check's results file from what run.sh collected; a GPU
// machine runs it rarely, so its verdicts are checked here on collected files made up for each case.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const script = join(repoRoot, 'tools/gpu-check/results.mjs');

const cases = ['vram_banks', 'vram_pull_from_another_process', 'vram_staged_pull_from_another_process', 'kernels'];
const nativeLog = (backend: string, names = cases): string =>
  names.map((name) => `ok cuda/${name} [${backend}]`).join('\n') + '\n';

/** What run.sh collects on a GPU machine where everything meets its bar. */
function passingRun(): Record<string, string> {
  const figures = {
    pull_1x4KiB_ms: 0.012,
    pull_ratios: {
      pull_42_vs_d2d: 0.95,
      pull_2352_vs_d2d: 0.6,
      pull_9408_vs_d2d: 0.4,
      template_pull_2352_vs_d2d: 0.9,
      template_pull_9408_vs_d2d: 0.88,
    },
    ratios: {
      ipc_copy_vs_d2d: 1,
      ipc_gather_2352_vs_d2d: 0.93,
      gather_2352_vs_d2d: 0.92,
      gather_9408_vs_d2d: 0.92,
      gather_routes_2352_vs_d2d: 0.91,
      gather_routes_9408_vs_d2d: 0.9,
    },
    verify_gbytes_per_s: 1500,
    verify_grouped_rows_gbytes_per_s: 1300,
    verify_pieces_gbytes_per_s: 1400,
    pinned_h2d_ms: 5.6,
    pinned_d2h_ms: 5.9,
    staged_pull_ms: 6.5,
    staged_in_place_share: 1,
  };
  const demo = {
    gpu: { active: true, mode: 'gpu', reason: '' },
    pull: { blocks: 42, verified: true, memory: 'vram', ms: 1.5 },
    decisions: [{ request: 'turn 2', savingMs: 26 }],
  };
  const probe = {
    vram: { supported: true },
    region: { kind: 'vram' },
    hostAsVram: { code: 'INVALID_PARAM' },
    templatePull: { bytes: 16384, planned: 16384, checksumsAgree: true },
  };
  return {
    'gpus.txt': 'NVIDIA H200, 580.65, 143771 MiB',
    'gpus.rc': '0',
    'preflight.json': JSON.stringify({ vram: true, reason: '', devices: 1, driver_version: 13000 }),
    'preflight.rc': '0',
    'native-loopback.log': nativeLog('loopback', ['vram_banks', 'kernels']),
    'native-loopback.rc': '0',
    'native-ucx.log': nativeLog('ucx'),
    'native-ucx.rc': '0',
    'vram_import-ucx.log': 'ok vram_import/engine_memory_served [ucx]\n',
    'vram_routes-ucx.log':
      'ok vram_routes/routes_of_every_shape [ucx]\nok vram_routes/large_descriptors_cut_on_the_gpu [ucx]\n' +
      'ok vram_routes/checksums_by_routes [ucx]\n',
    'staged_in_place-ucx.log': 'ok staged_in_place/staged_chunks_are_written_in_place [ucx]\n',
    'vram_withdrawn-ucx.log': [
      'ok vram_withdrawn/an_owners_free_waits_for_its_readers [ucx]',
      'ok vram_withdrawn/halves_of_one_allocation_share_its_mapping [ucx]',
      '',
    ].join('\n'),
    'figures.json': JSON.stringify(figures),
    'figures.rc': '0',
    'demo.json': JSON.stringify(demo),
    'demo.rc': '0',
    'probe.json': JSON.stringify(probe),
    'fetch.json': JSON.stringify({
      blocks: 42,
      checkedBlocks: 42,
      verify: 'full',
      reasons: [],
      ms_mean: 1.2,
      phases_mean_ms: { pin: 0.5, transfer: 0.2, verify: 0.3, release: 0.1 },
    }),
    'fetch.rc': '0',
    'probe.rc': '0',
  };
}

interface Entry {
  readonly pass: boolean;
  readonly detail?: string;
  readonly value?: number | null;
}
interface Results {
  readonly pass: boolean;
  readonly no_gpu?: string;
  readonly checks: Record<string, Entry>;
  readonly figures: Record<string, Entry>;
}

describe('the GPU check results (tools/gpu-check/results.mjs)', () => {
  const folders: string[] = [];
  afterEach(() => {
    for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
  });

  function compose(files: Record<string, string>): { status: number | null; stdout: string; results: Results } {
    const work = mkdtempSync(join(tmpdir(), 'gpu-check-results-'));
    folders.push(work);
    for (const [name, text] of Object.entries(files)) writeFileSync(join(work, name), text);
    const out = join(work, 'results.json');
    const run = spawnSync(process.execPath, [script, work, out], { encoding: 'utf8' });
    return { status: run.status, stdout: run.stdout, results: JSON.parse(readFileSync(out, 'utf8')) as Results };
  }
  const failing = (results: Results): string[] =>
    [...Object.entries(results.checks), ...Object.entries(results.figures)]
      .filter(([, entry]) => !entry.pass)
      .map(([name]) => name);

  it('passes, exit 0, when every check and figure of issue 31 meets its bar', () => {
    const { status, results } = compose(passingRun());
    expect(failing(results)).toEqual([]);
    expect(Object.keys(results.figures)).toEqual(
      expect.arrayContaining([
        'pull.vram_ipc.qwen3_42blocks.vs_d2d',
        'pull.vram_ipc.pieces.vs_d2d',
        'pull.vram_staged.qwen3_42blocks.vs_pinned_h2d',
        'verify.gpu.gbytes_per_s',
        'fetch.vram_ipc.qwen3_42blocks.ms',
      ]),
    );
    expect(results.figures['pull.vram_staged.qwen3_42blocks.vs_pinned_h2d']?.value).toBeCloseTo(5.6 / 6.5, 3);
    expect(results.figures['pull.vram_staged.qwen3_42blocks.vs_pinned_h2d']).toMatchObject({
      staged_pull_ms: 6.5,
      in_place_share: 1,
      pinned_h2d_ms: 5.6,
      pinned_d2h_ms: 5.9,
    });
    expect(results.figures['pull.vram_ipc.qwen3_42blocks.vs_d2d']).toMatchObject({ value: 0.95, fixed_cost_ms: 0.012 });
    expect(results.figures['verify.gpu.gbytes_per_s']).toMatchObject({
      value: 1300,
      one_row_gbytes_per_s: 1500,
      grouped_rows_gbytes_per_s: 1300,
      pieces_gbytes_per_s: 1400,
    });
    expect(results.figures['fetch.vram_ipc.qwen3_42blocks.ms']).toMatchObject({
      value: 1.2,
      phases_mean_ms: { pin: 0.5, transfer: 0.2, verify: 0.3, release: 0.1 },
    });
    expect([status, results.pass]).toEqual([0, true]);
  });

  it('without a GPU runs nothing: exit 2, the reason, every check and figure not run', () => {
    const reason = 'no driver library: libcuda.so.1 could not be loaded';
    const { status, stdout, results } = compose({
      'preflight.json': JSON.stringify({ vram: false, reason, devices: 0, driver_version: 0 }),
      'preflight.rc': '2',
    });
    expect(status).toBe(2);
    expect(results.no_gpu).toBe(`no GPU: ${reason}`);
    expect(stdout).toContain(`gpu-check: no GPU: ${reason}; nothing ran`);
    const ran = compose(passingRun()).results;
    expect([Object.keys(results.checks), Object.keys(results.figures)]).toEqual([
      Object.keys(ran.checks),
      Object.keys(ran.figures),
    ]);
    const entries = [...Object.values(results.checks), ...Object.values(results.figures)];
    expect(entries.every((entry) => !entry.pass && entry.detail === `not run: no GPU: ${reason}`)).toBe(true);
  });

  it('fails, exit 1, naming the figure under its bar: the lower of the two piece counts posted by template counts', () => {
    const files = passingRun();
    const figures = JSON.parse(files['figures.json'] as string) as { pull_ratios: Record<string, number> };
    figures.pull_ratios['template_pull_9408_vs_d2d'] = 0.8;
    const { status, stdout, results } = compose({ ...files, 'figures.json': JSON.stringify(figures) });
    expect(failing(results)).toEqual(['pull.vram_ipc.pieces.vs_d2d']);
    expect(results.figures['pull.vram_ipc.pieces.vs_d2d']).toMatchObject({
      value: 0.8,
      pieces_2352: 0.9,
      descriptors_2352: 0.6,
      descriptors_9408: 0.4,
    });
    expect([status, stdout]).toEqual([1, expect.stringContaining('FAIL (pull.vram_ipc.pieces.vs_d2d)')]);
  });

  it('merges gpu_figures’ lines, and names the error that stopped it for the figures it did not reach', () => {
    const files = passingRun();
    const copies = { pinned_h2d_ms: 5.6, ratios: { gather_2352_vs_d2d: 0.92, gather_9408_vs_d2d: 0.92 } };
    const ipc = {
      verify_gbytes_per_s: 1500,
      verify_grouped_rows_gbytes_per_s: 1300,
      ratios: { ipc_copy_vs_d2d: 1, ipc_gather_2352_vs_d2d: 0.93 },
    };
    const stopped = 'kvt_xfer_post: the peer "figures-source" is gone';
    const lines = [copies, ipc, { error: stopped }].map((line) => JSON.stringify(line)).join('\n');
    const { status, results } = compose({ ...files, 'figures.json': `${lines}\n` });
    expect(results.figures['kernel.gather_9408.vs_d2d']).toMatchObject({ pass: true, value: 0.92 });
    expect(results.figures['driver.ipc_copy.vs_d2d']).toMatchObject({ pass: true, value: 1 });
    expect(results.figures['verify.gpu.gbytes_per_s']).toMatchObject({ pass: true, value: 1300 });
    for (const name of ['pull.vram_ipc.qwen3_42blocks.vs_d2d', 'pull.vram_staged.qwen3_42blocks.vs_pinned_h2d'])
      expect(results.figures[name]).toMatchObject({
        pass: false,
        detail: `gpu_figures stopped before it: ${stopped}`,
      });
    expect(status).toBe(1);
  });

  it('fails the staged pull and its figure where test_cuda has no staged case and gpu_figures no staged time', () => {
    const files = passingRun();
    const figures = JSON.parse(files['figures.json'] as string) as Record<string, unknown>;
    delete figures['staged_pull_ms'];
    const { results } = compose({
      ...files,
      'native-ucx.log': nativeLog('ucx', ['vram_banks', 'vram_pull_from_another_process', 'kernels']),
      'figures.json': JSON.stringify(figures),
    });
    expect(failing(results)).toEqual(['pull.staged.two_processes', 'pull.vram_staged.qwen3_42blocks.vs_pinned_h2d']);
    expect(results.checks['pull.staged.two_processes']?.detail).toContain('not in this build');
  });

  it('fails the staged chunks written in place when test_staged_in_place’s case failed on ucx, naming its line', () => {
    const line =
      'FAIL staged_chunks_are_written_in_place [ucx] test/test_staged_in_place.c:51: every chunk was written';
    const { results } = compose({ ...passingRun(), 'staged_in_place-ucx.log': `${line}\n` });
    expect(failing(results)).toEqual(['pull.staged.in_place']);
    expect(results.checks['pull.staged.in_place']?.detail).toBe(line);
  });

  it('fails the owner’s free waiting for its readers when test_vram_withdrawn did not run it on ucx', () => {
    const files: Record<string, string> = passingRun();
    delete files['vram_withdrawn-ucx.log'];
    const { results } = compose(files);
    expect(failing(results)).toEqual(['vram.free_waits_for_readers', 'vram.one_mapping_per_allocation']);
    expect(results.checks['vram.free_waits_for_readers']?.detail).toContain(
      'ran no case an_owners_free_waits_for_its_readers',
    );
  });

  it('fails the one mapping per allocation when test_vram_withdrawn’s case failed on ucx, naming its line', () => {
    const line =
      'FAIL halves_of_one_allocation_share_its_mapping [ucx] test/test_vram_withdrawn.c:252: the READ of half 1 ends KVT_OK';
    const { results } = compose({
      ...passingRun(),
      'vram_withdrawn-ucx.log': `ok vram_withdrawn/an_owners_free_waits_for_its_readers [ucx]\n${line}\n`,
    });
    expect(failing(results)).toEqual(['vram.one_mapping_per_allocation']);
    expect(results.checks['vram.one_mapping_per_allocation']?.detail).toBe(line);
  });

  it('fails the sidecar’s vram import when test_vram_import’s case failed on ucx, naming its line', () => {
    const line = 'FAIL engine_memory_served [ucx] test/test_vram_import.c:120: the engine killed';
    const { results } = compose({ ...passingRun(), 'vram_import-ucx.log': `${line}\n` });
    expect(failing(results)).toEqual(['sidecar.vram_import']);
    expect(results.checks['sidecar.vram_import']?.detail).toBe(line);
  });

  it('fails the moves and the checksums cut on the GPU when test_vram_routes did not run on ucx', () => {
    const files: Record<string, string> = passingRun();
    delete files['vram_routes-ucx.log'];
    const { results } = compose(files);
    expect(failing(results)).toEqual(['pull.ipc.templates', 'pull.ipc.large_descriptors', 'verify.gpu.routes']);
    expect(results.checks['pull.ipc.templates']?.detail).toContain('ran no case routes_of_every_shape');
  });

  it('fails the probe when its template pull between vram banks moved short or its checksums disagree', () => {
    const files = passingRun();
    const short = { templatePull: { bytes: 8192, planned: 16384, checksumsAgree: true } };
    const disagree = { templatePull: { bytes: 16384, planned: 16384, checksumsAgree: false } };
    for (const change of [short, disagree]) {
      const probe = { ...(JSON.parse(files['probe.json'] as string) as object), ...change };
      expect(failing(compose({ ...files, 'probe.json': JSON.stringify(probe) }).results)).toEqual(['probe']);
    }
  });

  it('fails the fetch through the endpoints when a block was recomputed, and its time over the goal', () => {
    const fetched = {
      blocks: 41,
      checkedBlocks: 41,
      verify: 'full',
      reasons: [{ kind: 'checksum-mismatch' }],
      ms_mean: 3,
    };
    const { results } = compose({ ...passingRun(), 'fetch.json': JSON.stringify(fetched) });
    expect(failing(results)).toEqual(['endpoint.vram_fetch', 'fetch.vram_ipc.qwen3_42blocks.ms']);
    expect(results.figures['fetch.vram_ipc.qwen3_42blocks.ms']).toMatchObject({ value: 3, recompute_estimate_ms: 26 });
  });

  it('fails the main job when the demo pulled between host banks', () => {
    const files = passingRun();
    const demo = JSON.parse(files['demo.json'] as string) as { pull: Record<string, unknown> };
    delete demo.pull['memory'];
    const { results } = compose({ ...files, 'demo.json': JSON.stringify(demo) });
    expect(failing(results)).toEqual(['main_job.vram']);
    expect(results.checks['main_job.vram']?.detail).toContain('its banks dram');
  });
});
