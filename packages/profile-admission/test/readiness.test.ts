import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from '@kvreuse/descriptors';
import { loadTransport } from '@kvreuse/native-bindings';
import {
  admissionGate,
  builtInProfile,
  builtInProfiles,
  explainActivation,
  type NativeCapabilities,
  type Profile,
} from '@kvreuse/profile-admission';
import {
  type DiscoveryStore,
  openSqliteDiscovery,
  watchWorkerReadiness,
  type WorkerReadiness,
  type WorkerReadinessWatch,
} from '@kvreuse/discovery';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { publishHostWorker, publishParts, type PublishedWorker } from './registered-worker.js';
import {
  composed,
  machineCapabilities,
  type ReuseSwitches,
  type TestSettings,
  settingsFor,
  vramCapabilities,
  workerOf,
} from './support.js';

const transport = loadTransport();
const qwen = builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed });
const llama70b = builtInProfile('llama-3.1-70b-bf16-b64', { settings: composed });
const noVram = (machineCapabilities.vram as { reason: string }).reason;

/** One readiness change, as it reads. */
function summary(readiness: WorkerReadiness): string {
  if (readiness.ready) return 'ready';
  return `not ready: ${readiness.reasons.map((reason) => `${reason.kind}${reason.kind === 'gate' ? ` (${reason.gate})` : ''}`).join(', ')}`;
}

describe('profile admission as the registry readiness gate, over SQLite discovery', () => {
  let folder: string;
  let store: DiscoveryStore;
  let watch: WorkerReadinessWatch | undefined;
  let published: PublishedWorker | undefined;
  let seen: string[];

  beforeEach(async () => {
    folder = mkdtempSync(join(tmpdir(), 'kvreuse-admission-'));
    store = openSqliteDiscovery(join(folder, 'discovery.sqlite'), { pollIntervalMs: 5 });
    seen = [];
  });

  afterEach(async () => {
    await watch?.close();
    watch = undefined;
    await published?.close();
    published = undefined;
    await store.close();
    rmSync(folder, { recursive: true, force: true });
    expect(transport.counters()).toMatchObject({ liveRegistrations: 0, liveAllocations: 0, liveAgents: 0 });
  });

  interface Deployment {
    readonly switches: ReuseSwitches;
    /** The declared profile, if any, and the settings and capabilities the process runs with. */
    readonly profile: Profile | undefined;
    readonly settings: TestSettings;
    readonly capabilities: NativeCapabilities;
  }

  /** Follows the worker's readiness with the deployment's admission gate installed exactly when a profile is declared. */
  async function follow(workerId: string, deployment: Deployment): Promise<WorkerReadinessWatch> {
    const { profile, settings, capabilities } = deployment;
    watch = await watchWorkerReadiness(store, workerId, {
      ...(profile === undefined
        ? {}
        : { admissionGate: admissionGate(profile, { composition: composed, capabilities, settings }) }),
      onChange: (readiness) => seen.push(summary(readiness)),
    });
    return watch;
  }

  /** Waits until the readiness watch has judged the published parts (it reports a complete worker one way or the other). */
  async function judged(tracker: WorkerReadinessWatch): Promise<WorkerReadiness> {
    await vi.waitFor(() => expect(seen.at(-1)).not.toMatch(/no-parts|incomplete/), { timeout: 20_000, interval: 5 });
    await tracker.settled();
    return tracker.current;
  }

  const deploymentOf = (
    settingsProfile: Profile,
    declared: Profile | undefined,
    switches: ReuseSwitches,
    capabilities: NativeCapabilities,
    extra: readonly string[] = [],
  ): Deployment => ({
    switches,
    profile: declared,
    settings: settingsFor(settingsProfile, switches, extra),
    capabilities,
  });

  const activationFor = (deployment: Deployment, worker: Worker) =>
    explainActivation({
      composition: composed,
      settings: deployment.settings,
      profile: deployment.profile,
      capabilities: deployment.capabilities,
      workers: [worker],
    });

  const runnable = builtInProfiles({ settings: composed }).filter((profile) =>
    profile.roles.decode!.memoryKinds.includes('dram'),
  );

  it.each(runnable.map((profile) => [profile.name, profile] as const))(
    '%s: a decode worker of real host memory shaped as the profile says is admitted and ready',
    async (_name, profile) => {
      const deployment = deploymentOf(profile, profile, { reuse: true, gpuReuse: true }, machineCapabilities);
      const tracker = await follow('decode-p', deployment);
      const { tpSize } = profile.roles.decode!;
      published = await publishHostWorker(
        transport,
        { workerId: 'decode-p', role: 'decode', geometry: profile.geometry, tpSize, blocks: 2 },
        store,
      );
      const readiness = await judged(tracker);
      expect(seen).toEqual(['not ready: no-parts', 'ready']);
      expect(readiness.ready && readiness.worker.geometryDigest).toBe(profile.geometryDigest);
      expect(activationFor(deployment, published.worker)).toMatchObject({
        mode: 'host-only',
        reasons: [
          `the native library cannot register vram: ${noVram}`,
          expect.stringMatching(/^0 of the \d+ banks of the source workers \(decode-p\) are vram$/),
        ],
        admission: { admitted: true },
      });
    },
  );

  it('a worker whose descriptors contradict its declared profile never becomes ready, and says which fields', async () => {
    const deployment = deploymentOf(qwen, qwen, { reuse: true }, machineCapabilities);
    const tracker = await follow('decode-tp1', deployment);
    // Real registration at TP 1 where the profile says decode runs at TP 2.
    published = await publishHostWorker(
      transport,
      { workerId: 'decode-tp1', role: 'decode', geometry: qwen.geometry, tpSize: 1, blocks: 2 },
      store,
    );
    const readiness = await judged(tracker);
    expect(seen).toEqual(['not ready: no-parts', 'not ready: gate (profile qwen3-0.6b-bf16-b64)']);
    expect(readiness).toMatchObject({
      ready: false,
      reasons: [
        {
          kind: 'gate',
          message:
            'gate profile qwen3-0.6b-bf16-b64 refused: worker decode-tp1: roles.decode.tpSize: expected 2, actual 1',
        },
      ],
    });
    // The profile holds for the process; only this worker is refused, so it is no source of reuse.
    expect(activationFor(deployment, published.worker)).toMatchObject({
      mode: 'host-only',
      reasons: [
        'router.enable_decode_to_prefill_gpu_reuse is off',
        `the native library cannot register vram: ${noVram}`,
        'no source (decode) worker is admitted: worker decode-tp1 is refused and never becomes ready (worker decode-tp1: roles.decode.tpSize: expected 2, actual 1)',
      ],
    });
  });

  it('a worker hashing with another seed than its profile never becomes ready', async () => {
    const deployment = deploymentOf(qwen, qwen, { reuse: true }, machineCapabilities, [
      '--inventory-hash-seed=qwen@other',
    ]);
    const tracker = await follow('decode-seed', deployment);
    published = await publishHostWorker(
      transport,
      { workerId: 'decode-seed', role: 'decode', geometry: qwen.geometry, tpSize: 2, blocks: 2 },
      store,
    );
    const readiness = await judged(tracker);
    expect(seen).toEqual(['not ready: no-parts', 'not ready: gate (profile qwen3-0.6b-bf16-b64)']);
    expect(!readiness.ready && readiness.reasons[0]!.message).toBe(
      'gate profile qwen3-0.6b-bf16-b64 refused: blockHash.seed: expected "", actual "qwen@other" (set by --inventory-hash-seed, KVREUSE_INVENTORY_HASH_SEED or inventory.hash_seed)',
    );
  });

  describe('the activation table through readiness', () => {
    // Host-memory workers register real memory; GPU workers (a TP 8 Llama-3.1-70B decode worker) are
    // published as parts only, since this machine cannot register vram.
    const rows: [string, () => Deployment, 'host' | 'gpu', string[], { mode: string; reasons: string[] }][] = [
      [
        'reuse off, Qwen profile admitted',
        () => deploymentOf(qwen, qwen, {}, machineCapabilities),
        'host',
        ['not ready: no-parts', 'ready'],
        { mode: 'off', reasons: ['router.enable_decode_to_prefill_reuse is off'] },
      ],
      [
        'reuse on, GPU reuse off, no profile, host memory',
        () => deploymentOf(qwen, undefined, { reuse: true }, machineCapabilities),
        'host',
        ['not ready: no-parts', 'ready'],
        {
          mode: 'host-only',
          reasons: [
            'router.enable_decode_to_prefill_gpu_reuse is off',
            'no deployment profile is declared',
            `the native library cannot register vram: ${noVram}`,
            '0 of the 112 banks of the source workers (decode-1) are vram',
          ],
        },
      ],
      [
        'reuse on, GPU reuse on, no profile, vram capable, vram worker',
        () => deploymentOf(llama70b, undefined, { reuse: true, gpuReuse: true }, vramCapabilities),
        'gpu',
        ['not ready: no-parts', 'not ready: no-admission-gate'],
        { mode: 'host-only', reasons: ['no deployment profile is declared'] },
      ],
      [
        'reuse on, GPU reuse on, 70B profile on this machine',
        () => deploymentOf(llama70b, llama70b, { reuse: true, gpuReuse: true }, machineCapabilities),
        'gpu',
        ['not ready: no-parts', 'not ready: gate (profile llama-3.1-70b-bf16-b64)'],
        {
          mode: 'off',
          reasons: [
            `profile llama-3.1-70b-bf16-b64 is refused: nativeCapabilities: expected "vram", actual ${JSON.stringify(noVram)} (the native library lacks vram)`,
          ],
        },
      ],
      [
        'reuse on, GPU reuse off, 70B profile admitted, vram capable',
        () => deploymentOf(llama70b, llama70b, { reuse: true }, vramCapabilities),
        'gpu',
        ['not ready: no-parts', 'ready'],
        { mode: 'host-only', reasons: ['router.enable_decode_to_prefill_gpu_reuse is off'] },
      ],
      [
        'reuse on, GPU reuse on, 70B profile admitted, vram capable',
        () => deploymentOf(llama70b, llama70b, { reuse: true, gpuReuse: true }, vramCapabilities),
        'gpu',
        ['not ready: no-parts', 'ready'],
        { mode: 'gpu', reasons: [] },
      ],
    ];

    it.each(rows)('%s', async (_name, deploymentAt, memory, readiness, activation) => {
      const deployment = deploymentAt();
      const tracker = await follow('decode-1', deployment);
      let worker: Worker;
      if (memory === 'host') {
        published = await publishHostWorker(
          transport,
          { workerId: 'decode-1', role: 'decode', geometry: qwen.geometry, tpSize: 2, blocks: 2 },
          store,
        );
        worker = published.worker;
      } else {
        worker = workerOf({
          workerId: 'decode-1',
          role: 'decode',
          geometry: llama70b.geometry,
          tpSize: 8,
          memKind: 'vram',
        });
        published = await publishParts(store, worker.ranks);
      }
      await judged(tracker);
      expect(seen).toEqual(readiness);
      expect(activationFor(deployment, worker)).toMatchObject(activation);
    });
  });
});
