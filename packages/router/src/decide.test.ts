import { checkCompatibility } from '@kvreuse/descriptors';
import { blockHashFunction, blockHashScheme, hashBlockChain } from '@kvreuse/inventory';
import { describe, expect, it } from 'vitest';
import { profile, readyOf, Scenario, settingsOf, workerOf } from '../test/support.js';
import { TransferCalibration } from './calibration.js';
import { decide, type RouteDecision } from './decide.js';
import { RouteRequestError, RouterOptionError } from './errors.js';

// Priced so that every figure is exact in binary: 64 tokens × 62.5 µs = 4 ms saved per block; a host
// block costs 0.5 ms, a GPU block 0.25 ms; the lookup budget adds 1 ms. Eight host blocks: saving 32,
// cost 5, net 27.
const exact = [
  '--router-transfer-source-prefill-token-us=62.5',
  '--router-transfer-source-estimated-block-us=500',
  '--router-transfer-source-gpu-estimated-block-us=250',
  '--router-transfer-source-lookup-budget-ms=1',
  '--router-minimum-estimated-ttft-saving-ms=5',
  '--router-minimum-transfer-prefix-blocks=4',
  '--router-max-concurrent-pulls-per-source=4',
];

function scenario(flags: readonly string[] = []): Scenario {
  return new Scenario(16, settingsOf([...exact, ...flags]));
}

function route(s: Scenario, localBlocks = 0, extra: Parameters<Scenario['context']>[0] = {}): RouteDecision {
  return decide({ tokens: s.tokens, destination: { worker: s.destination, localBlocks } }, s.context(extra));
}

const hostSource = (s: Scenario, blocks = 8) => s.addSource(workerOf('decode-1'), 1, { blocks, tier: 'host' });
const gpuSource = (s: Scenario, blocks = 8) =>
  s.addSource(workerOf('decode-1', { memKind: 'vram' }), 1, { blocks, tier: 'gpu' });

interface Row {
  readonly setting: string;
  readonly flags: readonly string[];
  readonly setup: (s: Scenario) => void;
  readonly action: RouteDecision['action'];
  readonly reason: RouteDecision['reason'];
}

// Each setting on both sides of its threshold; everything else as `exact`.
const rows: Row[] = [
  { setting: 'enable_decode_to_prefill_reuse on', flags: [], setup: hostSource, action: 'pull', reason: 'worth-it' },
  {
    setting: 'enable_decode_to_prefill_reuse off',
    flags: ['--router-enable-decode-to-prefill-reuse=false'],
    setup: hostSource,
    action: 'recompute',
    reason: 'disabled',
  },
  {
    setting: 'enable_decode_to_prefill_gpu_reuse on, GPU source',
    flags: ['--router-enable-decode-to-prefill-gpu-reuse'],
    setup: gpuSource,
    action: 'pull',
    reason: 'worth-it',
  },
  {
    setting: 'enable_decode_to_prefill_gpu_reuse off, GPU source',
    flags: [],
    setup: gpuSource,
    action: 'recompute',
    reason: 'no-candidate',
  },
  {
    setting: 'minimum_estimated_ttft_saving_ms = net (27)',
    flags: ['--router-minimum-estimated-ttft-saving-ms=27'],
    setup: hostSource,
    action: 'pull',
    reason: 'worth-it',
  },
  {
    setting: 'minimum_estimated_ttft_saving_ms just above net (27.5)',
    flags: ['--router-minimum-estimated-ttft-saving-ms=27.5'],
    setup: hostSource,
    action: 'recompute',
    reason: 'not-worth-it',
  },
  {
    setting: 'minimum_transfer_prefix_blocks = extent (8)',
    flags: ['--router-minimum-transfer-prefix-blocks=8'],
    setup: hostSource,
    action: 'pull',
    reason: 'worth-it',
  },
  {
    setting: 'minimum_transfer_prefix_blocks = extent + 1 (9)',
    flags: ['--router-minimum-transfer-prefix-blocks=9'],
    setup: hostSource,
    action: 'recompute',
    reason: 'too-short',
  },
  {
    setting: 'transfer_source_estimated_block_us at the margin (3250: net 5)',
    flags: ['--router-transfer-source-estimated-block-us=3250'],
    setup: hostSource,
    action: 'pull',
    reason: 'worth-it',
  },
  {
    setting: 'transfer_source_estimated_block_us past it (3375: net 4)',
    flags: ['--router-transfer-source-estimated-block-us=3375'],
    setup: hostSource,
    action: 'recompute',
    reason: 'not-worth-it',
  },
  {
    setting: 'transfer_source_gpu_estimated_block_us at the margin (3250)',
    flags: ['--router-enable-decode-to-prefill-gpu-reuse', '--router-transfer-source-gpu-estimated-block-us=3250'],
    setup: gpuSource,
    action: 'pull',
    reason: 'worth-it',
  },
  {
    setting: 'transfer_source_gpu_estimated_block_us past it (3375)',
    flags: ['--router-enable-decode-to-prefill-gpu-reuse', '--router-transfer-source-gpu-estimated-block-us=3375'],
    setup: gpuSource,
    action: 'recompute',
    reason: 'not-worth-it',
  },
  {
    setting: 'transfer_source_lookup_budget_ms at the margin (23: net 5)',
    flags: ['--router-transfer-source-lookup-budget-ms=23'],
    setup: hostSource,
    action: 'pull',
    reason: 'worth-it',
  },
  {
    setting: 'transfer_source_lookup_budget_ms past it (23.5: net 4.5)',
    flags: ['--router-transfer-source-lookup-budget-ms=23.5'],
    setup: hostSource,
    action: 'recompute',
    reason: 'not-worth-it',
  },
  {
    setting: 'transfer_source_prefill_token_us at the margin (19.53125: saving 10, net 5)',
    flags: ['--router-transfer-source-prefill-token-us=19.53125'],
    setup: hostSource,
    action: 'pull',
    reason: 'worth-it',
  },
  {
    setting: 'transfer_source_prefill_token_us below it (19.5)',
    flags: ['--router-transfer-source-prefill-token-us=19.5'],
    setup: hostSource,
    action: 'recompute',
    reason: 'not-worth-it',
  },
  {
    setting: 'max_concurrent_pulls_per_source above the pulls served (3 > 2)',
    flags: ['--router-max-concurrent-pulls-per-source=3'],
    setup: (s) => busy(s, 2),
    action: 'pull',
    reason: 'worth-it',
  },
  {
    setting: 'max_concurrent_pulls_per_source = the pulls served (2)',
    flags: ['--router-max-concurrent-pulls-per-source=2'],
    setup: (s) => busy(s, 2),
    action: 'recompute',
    reason: 'no-candidate',
  },
];

function busy(s: Scenario, pulls: number): void {
  const worker = hostSource(s);
  for (let i = 0; i < pulls; i++) s.sources.pullStarted(worker.workerId, 1);
}

describe('decide: every router setting changes the decision where it should', () => {
  it.each(rows)('$setting → $action ($reason)', ({ flags, setup, action, reason }) => {
    const s = scenario(flags);
    setup(s);
    const decision = route(s);
    expect([decision.action, decision.reason]).toEqual([action, reason]);
  });

  it('prices a host pull exactly as the cost model says, and says it used the priors', () => {
    const s = scenario();
    hostSource(s);
    expect(route(s)).toMatchObject({
      extent: 8,
      savingMs: 32,
      costMs: 5,
      estimate: 'prior',
      prefillEstimate: 'prior',
      candidatesConsidered: 1,
      rejected: [],
    });
  });

  it('prices a GPU pull at the GPU prior: 8 × 0.25 + 1 ms', () => {
    const s = scenario(['--router-enable-decode-to-prefill-gpu-reuse']);
    gpuSource(s);
    expect(route(s)).toMatchObject({ action: 'pull', costMs: 3, source: { tier: 'gpu' } });
  });
});

describe('decide: activation', () => {
  it('is disabled when profile admission turns reuse off (the declared profile is refused for the whole process)', () => {
    const s = scenario(['--inventory-hash-seed=another-model']);
    hostSource(s);
    const activation = s.activation();
    expect(activation.mode).toBe('off');
    expect(route(s, 0, { activation })).toMatchObject({
      action: 'recompute',
      reason: 'disabled',
      detail: expect.stringContaining('reuse is off: profile llama-3.1-8b-bf16-b64 is refused'),
      candidatesConsidered: 0,
    });
  });
});

describe('decide: the pull hint', () => {
  it('names the source incarnation and its epoch, the block range beyond the local prefix, the hashes and the tier, and reserves nothing', () => {
    const s = scenario();
    s.addSource(workerOf('decode-1'), 7, { blocks: 12 });
    const decision = route(s, 3);
    expect(decision.source).toEqual({
      workerId: 'decode-1',
      incarnation: 'decode-1-a',
      epoch: 7,
      blocks: { start: 3, count: 9 },
      hashes: s.chain.slice(3, 12),
      blockTokens: 64,
      tier: 'host',
      linkClass: 'network',
    });
    expect(decision).toMatchObject({ action: 'pull', reason: 'worth-it', extent: 9 });
  });

  it('says same-host when source and destination run on one machine', () => {
    const s = scenario();
    s.sources.observe(readyOf(workerOf('decode-1'), 1), { host: 'node-a' });
    s.sources.inventoryComplete('decode-1', 1);
    s.retain(workerOf('decode-1'), 1, { blocks: 8 });
    const decision = decide(
      { chain: s.chain, destination: { worker: s.destination, localBlocks: 0, host: 'node-a' } },
      s.context(),
    );
    expect(decision.source?.linkClass).toBe('same-host');
  });

  it('decides the same from the chain as from the token ids (hashed with the model-salted function)', () => {
    const s = scenario();
    hostSource(s);
    const fromChain = decide({ chain: s.chain, destination: { worker: s.destination, localBlocks: 0 } }, s.context());
    expect(fromChain).toEqual(route(s));
  });
});

describe('decide: candidates', () => {
  it('picks the best net saving and marks the others outbid; the longest prefix wins', () => {
    const s = scenario();
    s.addSource(workerOf('decode-1'), 1, { blocks: 6 });
    s.addSource(workerOf('decode-2'), 1, { blocks: 10 });
    const decision = route(s);
    expect(decision.source?.workerId).toBe('decode-2');
    expect(decision.candidatesConsidered).toBe(2);
    expect(decision.rejected).toEqual([
      { worker: 'decode-1', reason: 'outbid', detail: expect.stringContaining("less than decode-2's 34 ms") },
    ]);
  });

  it('breaks a tie on net saving by the smaller worker id, whatever the order they joined in', () => {
    for (const order of [
      ['decode-b', 'decode-a'],
      ['decode-a', 'decode-b'],
    ]) {
      const s = scenario();
      for (const id of order) s.addSource(workerOf(id), 1, { blocks: 8 });
      expect(route(s).source?.workerId).toBe('decode-a');
    }
  });

  it('prefers a GPU source to a host source of the same prefix when GPU reuse is active (cheaper per block)', () => {
    const s = scenario(['--router-enable-decode-to-prefill-gpu-reuse']);
    s.addSource(workerOf('decode-a'), 1, { blocks: 8, tier: 'host' });
    s.addSource(workerOf('decode-b', { memKind: 'vram' }), 1, { blocks: 8, tier: 'gpu' });
    expect(route(s).source).toMatchObject({ workerId: 'decode-b', tier: 'gpu' });
  });

  it('when no source qualifies, explains not-worth-it by the best source long enough, not by a shorter one that saves more', () => {
    // decode-1: 3 GPU blocks, net 10.25 ms but too short; decode-2: 5 host blocks at 3.5 ms each, net 1.5 ms.
    const s = scenario([
      '--router-enable-decode-to-prefill-gpu-reuse',
      '--router-transfer-source-estimated-block-us=3500',
    ]);
    s.addSource(workerOf('decode-1', { memKind: 'vram' }), 1, { blocks: 3, tier: 'gpu' });
    s.addSource(workerOf('decode-2'), 1, { blocks: 5, tier: 'host' });
    const decision = route(s);
    expect(decision).toMatchObject({
      action: 'recompute',
      reason: 'not-worth-it',
      extent: 5,
      savingMs: 20,
      costMs: 18.5,
    });
    expect(decision.detail).toBe(
      'the best source, decode-2: saves 20 ms for 18.5 ms (prior estimate), net 1.5 ms; router.minimum_estimated_ttft_saving_ms = 5',
    );
    expect(decision.rejected.map(({ worker, reason }) => [worker, reason])).toEqual([
      ['decode-1', 'too-short'],
      ['decode-2', 'not-worth-it'],
    ]);
  });

  it('serves a prefix split across tiers as mixed, at the slower tier’s price, only when GPU reuse is active', () => {
    const gpu = scenario(['--router-enable-decode-to-prefill-gpu-reuse']);
    gpu.addSource(workerOf('decode-1', { memKind: 'vram' }), 1, { blocks: 8, tier: 'split' });
    expect(route(gpu)).toMatchObject({ action: 'pull', costMs: 5, source: { tier: 'mixed' } });
  });

  it('without GPU reuse, cuts a prefix split across tiers to its leading host run, and says so', () => {
    // Blocks 0–3 in host memory, 4–7 on the GPU only.
    const hostOnly = scenario();
    hostOnly.addSource(workerOf('decode-1'), 1, { blocks: 8, tier: 'split' });
    const cut = {
      retainedBlocks: 8,
      usableBlocks: 4,
      reason: 'gpu-not-admitted',
      detail: expect.stringContaining('only the first 4 are in host memory, block 4 is in GPU memory only'),
    };
    const decision = route(hostOnly);
    expect(decision).toMatchObject({
      action: 'pull',
      extent: 4,
      savingMs: 16,
      costMs: 3,
      cut,
      source: { tier: 'host', blocks: { start: 0, count: 4 } },
    });
    expect(decision.detail).toContain('only the first 4 are in host memory');
    // The cut prefix is priced and judged as such: 3 blocks beyond a destination holding 1 are too short.
    expect(route(hostOnly, 1)).toMatchObject({ action: 'recompute', reason: 'too-short', extent: 3, cut });
    // A destination holding the whole host run: nothing on an allowed tier extends it.
    const covered = route(hostOnly, 4);
    expect(covered).toMatchObject({ action: 'recompute', reason: 'no-candidate' });
    expect(covered).not.toHaveProperty('cut');
    expect(covered.rejected).toEqual([
      {
        worker: 'decode-1',
        reason: 'gpu-not-admitted',
        detail: expect.stringContaining(
          'retains 8 leading blocks, only the first 4 are in host memory and the destination holds 4 already',
        ),
      },
    ]);
  });

  it('without GPU reuse, takes nothing from a prefix whose first block is on the GPU only', () => {
    const s = scenario();
    gpuSource(s);
    expect(route(s).rejected).toEqual([
      {
        worker: 'decode-1',
        reason: 'gpu-not-admitted',
        detail: expect.stringContaining('none of them is in host memory'),
      },
    ]);
    // A whole host prefix is not cut.
    const host = scenario();
    hostSource(host);
    expect(route(host)).not.toHaveProperty('cut');
  });

  it('uses a host copy of GPU blocks when GPU reuse is not active', () => {
    const s = scenario();
    s.addSource(workerOf('decode-1', { memKind: 'vram' }), 1, { blocks: 8, tier: 'both' });
    expect(
      route(s, 0, { activation: { mode: 'host-only', reasons: ['router.enable_decode_to_prefill_gpu_reuse is off'] } })
        .source?.tier,
    ).toBe('host');
  });

  it.each([
    [
      'the destination itself',
      (s: Scenario) =>
        s.addSource(workerOf('prefill-0', { role: 'prefill', incarnation: 'prefill-0-a' }), 1, { blocks: 8 }),
      'destination',
    ],
    ['a worker that is not ready', (s: Scenario) => s.retain(workerOf('decode-1'), 1, { blocks: 8 }), 'not-ready'],
    [
      'a prefill worker',
      (s: Scenario) => s.addSource(workerOf('prefill-9', { role: 'prefill' }), 1, { blocks: 8 }),
      'not-decode',
    ],
    [
      'an unhealthy source',
      (s: Scenario) => {
        hostSource(s);
        s.sources.setHealth('decode-1', { healthy: false, reason: 'peer fenced after 3 failed pulls' });
      },
      'unhealthy',
    ],
    [
      'a warming source',
      (s: Scenario) => s.addSource(workerOf('decode-1'), 1, { blocks: 8 }, { complete: false }),
      'source-warming',
    ],
    ['a busy source', (s: Scenario) => busy(s, 4), 'source-busy'],
    [
      'a source of another block size',
      (s: Scenario) =>
        s.addSource(workerOf('decode-1', { geometry: { ...workerOf('x').geometry, blockTokens: 16 } }), 1, {
          blocks: 8,
        }),
      'incompatible',
    ],
    [
      'a source of another head order (same hashes, blocks that cannot move as they are)',
      (s: Scenario) =>
        s.addSource(workerOf('decode-1', { geometry: { ...workerOf('x').geometry, headOrder: 'NHD' } }), 1, {
          blocks: 8,
        }),
      'incompatible',
    ],
    [
      'a source that retains no more than the destination holds',
      (s: Scenario) => s.addSource(workerOf('decode-1'), 1, { blocks: 2 }),
      'no-extension',
    ],
    ['a GPU-only source without GPU reuse', gpuSource, 'gpu-not-admitted'],
  ] as const)('rejects %s, and recomputes with no candidate', (_name, setup, reason) => {
    const s = scenario();
    setup(s);
    const decision = route(s, 2);
    expect(decision).toMatchObject({ action: 'recompute', reason: 'no-candidate', candidatesConsidered: 1 });
    expect(decision.rejected.map((rejection) => rejection.reason)).toEqual([reason]);
  });

  it("pulls from a compatible source that lays its banks out differently: its hashes are the destination's", () => {
    const s = scenario();
    const contiguous = workerOf('decode-1', {
      geometry: { ...workerOf('x').geometry, bankLayout: 'fully-contiguous' },
    });
    expect(contiguous.geometryDigest).not.toBe(s.destination.geometryDigest);
    expect(checkCompatibility(contiguous, s.destination).ok).toBe(true);
    // The source hashes what it retains with its own geometry: the same chain as the destination's.
    expect(hashBlockChain(s.tokens, blockHashScheme(contiguous.geometry, profile.blockHash.seed))).toEqual(s.chain);
    s.addSource(contiguous, 1, { blocks: 8 });
    expect(route(s, 2)).toMatchObject({
      action: 'pull',
      source: { workerId: 'decode-1', blocks: { start: 2, count: 6 } },
    });
  });

  it("takes the link class from the hosts the rank parts publish, not the destination's given host", () => {
    const destination = workerOf('prefill-h', { role: 'prefill', host: 'node-a' });
    const linkFrom = (host: string) => {
      const s = scenario();
      s.addSource(workerOf('decode-1', { host }), 1, { blocks: 8 });
      return decide(
        { tokens: s.tokens, destination: { worker: destination, localBlocks: 0, host: 'given-elsewhere' } },
        s.context(),
      ).source?.linkClass;
    };
    expect(linkFrom('node-a')).toBe('same-host');
    expect(linkFrom('node-b')).toBe('network');
  });

  it('rejects a source that declares another block hash function or seed', () => {
    for (const blockHash of [
      { function: 'vllm.sha256', seed: profile.blockHash.seed },
      { function: blockHashFunction, seed: 'another seed' },
    ]) {
      const s = scenario();
      s.sources.observe(readyOf(workerOf('decode-1'), 1), { blockHash });
      s.sources.inventoryComplete('decode-1', 1);
      s.retain(workerOf('decode-1'), 1, { blocks: 8 });
      expect(route(s).rejected).toEqual([
        { worker: 'decode-1', reason: 'incompatible', detail: expect.stringContaining(blockHash.function) },
      ]);
    }
    const same = scenario();
    same.sources.observe(readyOf(workerOf('decode-1'), 1), {
      blockHash: { function: blockHashFunction, seed: profile.blockHash.seed },
    });
    same.sources.inventoryComplete('decode-1', 1);
    same.retain(workerOf('decode-1'), 1, { blocks: 8 });
    expect(route(same).action).toBe('pull');
  });

  it('recomputes with no candidate when nobody retains the first block, or the destination holds the whole prompt', () => {
    const s = scenario();
    expect(route(s)).toMatchObject({
      action: 'recompute',
      reason: 'no-candidate',
      candidatesConsidered: 0,
      detail: 'no worker retains the first block of the prompt',
    });
    hostSource(s);
    expect(route(s, 16)).toMatchObject({ action: 'recompute', reason: 'no-candidate', candidatesConsidered: 0 });
  });

  it('takes a warming source once it has published its complete inventory, and a busy one once a pull ends', () => {
    const s = scenario();
    s.addSource(workerOf('decode-1'), 1, { blocks: 8 }, { complete: false });
    expect(route(s).rejected[0]?.reason).toBe('source-warming');
    s.sources.inventoryComplete('decode-1', 1);
    expect(route(s).action).toBe('pull');
    for (let i = 0; i < 4; i++) s.sources.pullStarted('decode-1', 1);
    expect(route(s).rejected[0]?.reason).toBe('source-busy');
    s.sources.pullEnded('decode-1', 1);
    expect(route(s).action).toBe('pull');
  });
});

describe('decide: a restarted source', () => {
  it('is never chosen with its old incarnation’s inventory', () => {
    const s = scenario();
    const before = s.addSource(workerOf('decode-1', { incarnation: 'inc-1' }), 1, { blocks: 8 });
    expect(route(s).source).toMatchObject({ incarnation: 'inc-1', epoch: 1 });

    // It restarts: the new incarnation is ready (and even says its inventory is complete) before its first batch.
    const after = workerOf('decode-1', { incarnation: 'inc-2' });
    s.sources.observe(readyOf(after, 2));
    s.sources.inventoryComplete('decode-1', 2);
    const stale = route(s);
    expect(stale).toMatchObject({ action: 'recompute', reason: 'no-candidate' });
    expect(stale.rejected).toEqual([
      {
        worker: 'decode-1',
        reason: 'stale-incarnation',
        detail: expect.stringContaining("incarnation inc-1's blocks"),
      },
    ]);

    // The old incarnation's readiness arriving late changes nothing.
    expect(s.sources.observe(readyOf(before, 1))).toBe(false);
    expect(route(s).rejected[0]?.reason).toBe('stale-incarnation');

    // The new incarnation's first batch replaces the old inventory: it retains 5 blocks, and is chosen for those.
    s.retain(after, 2, { blocks: 5 });
    expect(route(s).source).toMatchObject({ incarnation: 'inc-2', epoch: 2, blocks: { start: 0, count: 5 } });
  });

  it('is not chosen once its replacement claims the epoch fence, before the replacement is ready', () => {
    const s = scenario();
    s.addSource(workerOf('decode-1', { incarnation: 'inc-1' }), 1, { blocks: 8 });
    expect(route(s).source).toMatchObject({ incarnation: 'inc-1' });
    // What watchWorkerReadiness reports as the new incarnation claims the fence: inc-1 is superseded.
    s.sources.observe({
      ready: false,
      workerId: 'decode-1',
      incarnation: 'inc-2',
      reasons: [
        {
          kind: 'superseded',
          message:
            'incarnation inc-1 (epoch 1) is superseded by incarnation inc-2 (epoch 2), which has published no part yet',
          stale: { incarnation: 'inc-1', epoch: 1 },
        },
      ],
    });
    expect(s.sources.get('decode-1')).toBeUndefined();
    expect(route(s)).toMatchObject({ action: 'recompute', rejected: [{ worker: 'decode-1', reason: 'not-ready' }] });

    // Once inc-2 is ready, a late report that inc-1 is not ready leaves inc-2 ready.
    const after = workerOf('decode-1', { incarnation: 'inc-2' });
    s.sources.observe(readyOf(after, 2));
    s.sources.observe({ ready: false, workerId: 'decode-1', incarnation: 'inc-1', reasons: [] });
    expect(s.sources.get('decode-1')).toMatchObject({ incarnation: 'inc-2', epoch: 2 });
  });

  it('warms again when the new incarnation becomes ready, until it says its inventory is complete', () => {
    const s = scenario();
    s.addSource(workerOf('decode-1', { incarnation: 'inc-1' }), 1, { blocks: 8 });
    const after = workerOf('decode-1', { incarnation: 'inc-2' });
    s.sources.observe(readyOf(after, 2));
    s.retain(after, 2, { blocks: 8 });
    expect(route(s).rejected[0]?.reason).toBe('source-warming');
    s.sources.inventoryComplete('decode-1', 2);
    expect(route(s).source?.epoch).toBe(2);
  });
});

describe('decide: the lookup budget', () => {
  // With the clock moving 1 ms per reading: the start, after hashing, after the lookup, before every
  // candidate but the first, and after the last — n + 3 readings, so n + 2 ms pass for n candidates.
  it.each([
    [1, 3, 'pull'],
    [1, 2.5, 'budget-exceeded'],
    [3, 5, 'pull'],
    [3, 4.5, 'budget-exceeded'],
  ] as const)('with %i candidates and a budget of %f ms: %s', (candidates, budget, outcome) => {
    // The budget is also in the cost: a large saving keeps every pull worth it.
    const s = new Scenario(40, settingsOf([...exact, `--router-transfer-source-lookup-budget-ms=${budget}`]));
    for (let i = 0; i < candidates; i++) s.addSource(workerOf(`decode-${i}`), 1, { blocks: 30 });
    s.clock.stepMs = 1;
    const decision = route(s);
    expect(outcome === 'pull' ? decision.action : decision.reason).toBe(outcome);
    if (outcome === 'budget-exceeded')
      expect(decision).toMatchObject({
        action: 'recompute',
        extent: 0,
        detail: expect.stringContaining(`${budget} ms`),
      });
  });

  it('stops at once when hashing or the lookup already took the budget, and never looks at a candidate', () => {
    const s = scenario();
    hostSource(s);
    let readings = 0;
    const context = { ...s.context(), clock: () => (readings++ === 0 ? 0 : 1.5) };
    expect(decide({ tokens: s.tokens, destination: { worker: s.destination, localBlocks: 0 } }, context)).toMatchObject(
      {
        action: 'recompute',
        reason: 'budget-exceeded',
        candidatesConsidered: 0,
        rejected: [],
      },
    );
  });
});

describe('decide: calibration', () => {
  it('prices with a confident calibration instead of the priors, and says so', () => {
    const s = scenario();
    hostSource(s);
    const calibration = new TransferCalibration({ now: s.clock.now });
    for (let blocks = 1; blocks <= 8; blocks++)
      calibration.record({
        linkClass: 'network',
        tier: 'host',
        blocks,
        bytes: blocks * 1000,
        transferMs: 0.5 + blocks * 0.25,
      });
    const decision = route(s, 0, { calibration });
    expect(decision.estimate).toBe('calibrated');
    expect(decision.costMs).toBeCloseTo(0.5 + 8 * 0.25 + 1, 9);
  });

  it('never pulls what the settings forbid, however cheap the receipts say pulls are', () => {
    const calibration = new TransferCalibration();
    for (let blocks = 1; blocks <= 16; blocks++)
      calibration.record({
        linkClass: 'network',
        tier: 'host',
        blocks,
        bytes: 1,
        transferMs: blocks * 0.001,
        prefillTokenUs: 1000,
      });
    const off = scenario(['--router-enable-decode-to-prefill-reuse=false']);
    hostSource(off);
    expect(route(off, 0, { calibration }).reason).toBe('disabled');
    const short = scenario(['--router-minimum-transfer-prefix-blocks=9']);
    hostSource(short);
    expect(route(short, 0, { calibration })).toMatchObject({ reason: 'too-short', estimate: 'calibrated' });
  });
});

describe('decide: a calibration whose clock fails', () => {
  /** A confident calibration of host pulls over the network: 0.5 ms per pull and 0.25 ms per block. */
  function calibrated(now: () => number): TransferCalibration {
    const calibration = new TransferCalibration({ now });
    for (let blocks = 1; blocks <= 8; blocks++)
      calibration.record({
        linkClass: 'network',
        tier: 'host',
        blocks,
        bytes: blocks,
        transferMs: 0.5 + blocks * 0.25,
      });
    return calibration;
  }

  /** A clock that reads 0 until `fail` is called, then throws from its `readings`-th reading on (0: at once). */
  function failingClock(): { readonly now: () => number; fail(readings: number): void } {
    let readingsLeft = Infinity;
    return {
      now: () => {
        if (readingsLeft-- <= 0) throw new Error('clock source gone');
        return 0;
      },
      fail: (readings) => {
        readingsLeft = readings;
      },
    };
  }

  it('prices with the priors, as without a calibration, and says why in the decision', () => {
    const s = scenario();
    hostSource(s);
    const clock = failingClock();
    const calibration = calibrated(clock.now);
    expect(route(s, 0, { calibration }).estimate).toBe('calibrated');
    clock.fail(0);
    const decision = route(s, 0, { calibration });
    const uncalibrated = route(s);
    const fault = {
      refusal: 'threw',
      detail: 'calibration clock options.now is refused: it threw: clock source gone; the calibration is unchanged',
    };
    expect(decision).toEqual({
      ...uncalibrated,
      detail: `${uncalibrated.detail}; priced with the priors: ${fault.detail}`,
      calibrationFault: fault,
    });
  });

  it('prices every candidate with the priors once the clock fails, also those priced before it failed', () => {
    const s = scenario();
    s.addSource(workerOf('decode-1'), 1, { blocks: 6 });
    s.addSource(workerOf('decode-2'), 1, { blocks: 10 });
    const clock = failingClock();
    const calibration = calibrated(clock.now);
    // The first candidate reads the clock twice (its prefill estimate, its transfer fit); the second fails.
    clock.fail(2);
    const decision = route(s, 0, { calibration });
    const uncalibrated = route(s);
    expect(decision).toMatchObject({
      source: { workerId: 'decode-2' },
      estimate: 'prior',
      prefillEstimate: 'prior',
      savingMs: uncalibrated.savingMs,
      costMs: uncalibrated.costMs,
      rejected: uncalibrated.rejected,
      calibrationFault: { refusal: 'threw' },
    });
  });

  it('says so also when the decision ends past the lookup budget', () => {
    const s = new Scenario(40, settingsOf([...exact, '--router-transfer-source-lookup-budget-ms=3.5']));
    for (const id of ['decode-1', 'decode-2', 'decode-3']) s.addSource(workerOf(id), 1, { blocks: 30 });
    s.clock.stepMs = 1;
    const clock = failingClock();
    const calibration = calibrated(clock.now);
    clock.fail(0);
    expect(route(s, 0, { calibration })).toMatchObject({
      reason: 'budget-exceeded',
      detail: expect.stringMatching(/lookup_budget_ms = 3\.5 ms.*; priced with the priors: calibration clock/),
      calibrationFault: { refusal: 'threw' },
    });
  });

  it('leaves a decision that never reads the calibration as it is', () => {
    const s = scenario(['--router-enable-decode-to-prefill-reuse=false']);
    hostSource(s);
    const clock = failingClock();
    const calibration = calibrated(clock.now);
    clock.fail(0);
    expect(route(s, 0, { calibration })).toEqual(route(s));
  });
});

describe('decide: bad input', () => {
  it('refuses a request without a prompt, with both, or with a bad local prefix, naming it', () => {
    const s = scenario();
    const destination = { worker: s.destination, localBlocks: 0 };
    expect(() => decide({ destination } as never, s.context())).toThrow(RouteRequestError);
    expect(() => decide({ chain: s.chain, tokens: s.tokens, destination } as never, s.context())).toThrow(
      /give exactly one/,
    );
    expect(() =>
      decide({ chain: s.chain, destination: { worker: s.destination, localBlocks: -1 } }, s.context()),
    ).toThrow(/destination.localBlocks = -1/);
    expect(() => decide({ tokens: [...s.tokens.slice(0, 63), 1.5], destination }, s.context())).toThrow(/tokens\[63\]/);
    expect(() => decide({ chain: [1n, -2n], destination }, s.context())).toThrow(
      /route request chain.*a block hash is a bigint/,
    );
    expect(() => decide({ chain: 'abc' as never, destination }, s.context())).toThrow(/route request chain = "abc"/);
    expect(() => decide({ chain: s.chain, destination: { worker: {} as never, localBlocks: 0 } }, s.context())).toThrow(
      /destination.worker/,
    );
  });

  it('refuses a context without an inventory, a source book, settings or an activation', () => {
    const s = scenario();
    const request = { chain: s.chain, destination: { worker: s.destination, localBlocks: 0 } };
    for (const [key, message] of [
      ['inventory', /context.inventory/],
      ['sources', /context.sources/],
      ['settings', /context.settings/],
      ['activation', /context.activation/],
      ['clock', /context.clock/],
    ] as const) {
      expect(() => decide(request, { ...s.context(), [key]: 'wrong' } as never)).toThrow(RouterOptionError);
      expect(() => decide(request, { ...s.context(), [key]: 'wrong' } as never)).toThrow(message);
    }
  });
});
