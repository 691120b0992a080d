import type { RankPart } from '@kvreuse/descriptors';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { rankPartsOf } from '@kvreuse-internal/test-support';
import { changeLog, recordWatch } from '../test/watch-recorder.js';
import { localBackends, type StoreUnderTest } from '../test/helpers/stores.js';
import type {
  DiscoveryEntry,
  DiscoveryStore,
  DiscoveryWatch,
  LeaseId,
  WatchListener,
  WatchNotice,
  WatchOptions,
} from './types.js';
import type { GateVerdict, ReadinessGate } from './gate.js';
import { claimIncarnationEpoch } from './incarnation-epoch.js';
import { publishRankParts, withdrawRankParts } from './publish.js';
import { rankPartKey, workerPartsPrefix } from './rank-part-keys.js';
import { encodeRankPartRecord } from './rank-part-record.js';
import { watchWorkerReadiness, type WorkerReadiness, type WorkerReadinessWatch } from './worker-readiness.js';

const workerId = 'decode-7';

/** What a watcher was told, in a form that reads like the expected sequence. */
function summary(readiness: WorkerReadiness): string {
  if (readiness.ready) return `ready ${readiness.incarnation}`;
  return `not ready ${readiness.incarnation ?? '-'}: ${readiness.reasons.map((reason) => reason.message).join(' | ')}`;
}

/** The store, and a way to tell its readiness watch what a store restored from a backup would show it. */
function withWatchListener(store: DiscoveryStore): { store: DiscoveryStore; notify(notice: WatchNotice): void } {
  let listener: WatchListener | undefined;
  const watched = new Proxy(store, {
    get(target, property) {
      if (property === 'watch')
        return (prefix: string, onNotice: WatchListener, options?: WatchOptions) => {
          listener = onNotice;
          return target.watch(prefix, onNotice, options);
        };
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: watched, notify: (notice) => listener!(notice) };
}

class MutableGate implements ReadinessGate {
  readonly name = 'profile-admission';
  verdict: GateVerdict | 'throw' = { pass: true };
  #changed: (() => void) | undefined;
  evaluate(): GateVerdict {
    if (this.verdict === 'throw') throw new Error('profile table unreadable');
    return this.verdict;
  }
  subscribe(changed: () => void): () => void {
    this.#changed = changed;
    return () => (this.#changed = undefined);
  }
  set(verdict: GateVerdict | 'throw'): void {
    this.verdict = verdict;
    this.#changed?.();
  }
}

it('watchWorkerReadiness refuses arguments of the wrong shape, naming the argument', async () => {
  const { store, dispose } = localBackends[0]!.open();
  const option = (name: string) => expect.objectContaining({ code: 'INVALID_DISCOVERY_OPTION', option: name });
  await expect(watchWorkerReadiness(store, workerId, undefined as never)).rejects.toThrow(option('options'));
  await expect(watchWorkerReadiness(store, workerId, {} as never)).rejects.toThrow(option('options.onChange'));
  await expect(watchWorkerReadiness(store, workerId, { onChange: () => {}, gates: [null] } as never)).rejects.toThrow(
    option('options.gates[0]'),
  );
  const evaluate = () => ({ pass: true }) as const;
  await expect(
    watchWorkerReadiness(store, workerId, {
      onChange: () => {},
      gates: [{ name: 'profile', evaluate: 'yes' }],
    } as never),
  ).rejects.toThrow(option('options.gates[0].evaluate'));
  await expect(
    watchWorkerReadiness(store, workerId, { onChange: () => {}, admissionGate: { evaluate } } as never),
  ).rejects.toThrow(option('options.admissionGate.name'));
  await expect(
    watchWorkerReadiness(store, workerId, {
      onChange: () => {},
      admissionGate: { name: 'profile-admission', evaluate, subscribe: 1 },
    } as never),
  ).rejects.toThrow(option('options.admissionGate.subscribe'));
  await expect(watchWorkerReadiness(undefined as never, workerId, { onChange: () => {} })).rejects.toThrow(
    option('store'),
  );
  await dispose();
});

describe.each(localBackends)('worker readiness on $name discovery', (backend) => {
  let under: StoreUnderTest;
  let store: DiscoveryStore;
  let lease: LeaseId;
  let watch: WorkerReadinessWatch | undefined;
  let seen: string[];
  let warnings: string[];

  beforeEach(async () => {
    under = backend.open();
    store = under.store;
    lease = (await store.grantLease(60_000)).id;
    seen = [];
    warnings = [];
  });

  afterEach(async () => {
    await watch?.close();
    watch = undefined;
    await under.dispose();
  });

  async function follow(
    gates: readonly ReadinessGate[] = [],
    admissionGate?: ReadinessGate,
  ): Promise<WorkerReadinessWatch> {
    watch = await watchWorkerReadiness(store, workerId, {
      gates,
      ...(admissionGate === undefined ? {} : { admissionGate }),
      onChange: (readiness) => seen.push(summary(readiness)),
      logger: { warn: (message) => warnings.push(message) },
    });
    return watch;
  }

  /** Publishes parts the way a worker does: its incarnation claims its epoch (once), then publishes fenced by it. */
  async function publish(parts: readonly RankPart[], leaseId: LeaseId = lease): Promise<number> {
    const { epoch } = await claimIncarnationEpoch(store, parts[0]!);
    return publishRankParts(store, parts, { lease: leaseId, epoch });
  }

  async function until(count: number): Promise<void> {
    await vi.waitFor(() => expect(seen.length).toBeGreaterThanOrEqual(count), { timeout: 20_000, interval: 5 });
    await watch?.settled();
  }

  it('is ready only once every rank is published, and watchers see each change in order', async () => {
    const [tp0, tp1] = rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2 }) as [RankPart, RankPart];
    const tracker = await follow();
    await publish([tp0]);
    await until(2);
    await publish([tp1]);
    await until(3);
    expect(seen).toEqual([
      'not ready -: no valid rank part is published',
      'not ready inc-a: missing ranks (tp 1, pp 0)',
      'ready inc-a',
    ]);
    expect(tracker.current.ready && tracker.current.worker.ranks.map((part) => part.parallel.tpRank)).toEqual([0, 1]);
  });

  it('closes the store watch and the gate subscriptions it opened when a gate cannot be subscribed to', async () => {
    const watchStore = store.watch.bind(store);
    const opened: DiscoveryWatch[] = [];
    vi.spyOn(store, 'watch').mockImplementation(async (...args) => {
      const storeWatch = await watchStore(...args);
      vi.spyOn(storeWatch, 'close');
      opened.push(storeWatch);
      return storeWatch;
    });
    const unsubscribe = vi.fn();
    const followed: ReadinessGate = {
      name: 'followed',
      evaluate: () => ({ pass: true }),
      subscribe: () => unsubscribe,
    };
    const broken: ReadinessGate = {
      name: 'broken',
      evaluate: () => ({ pass: true }),
      subscribe: () => {
        throw new Error('the profile table cannot be followed');
      },
    };
    await expect(follow([followed, broken])).rejects.toThrow('the profile table cannot be followed');
    expect(opened).toHaveLength(1);
    expect(opened[0]!.close).toHaveBeenCalledOnce();
    expect(unsubscribe).toHaveBeenCalledOnce();
  });

  it('withholds readiness while a gate fails, and follows the gate as it changes', async () => {
    const gate = new MutableGate();
    gate.verdict = { pass: false, reason: 'profile "qwen3-decode" not admitted: geometry digest differs' };
    await publish(rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2 }));
    await follow([gate]);
    gate.set({ pass: true });
    await until(2);
    gate.set('throw');
    await until(3);
    expect(seen).toEqual([
      'not ready inc-a: gate profile-admission refused: profile "qwen3-decode" not admitted: geometry digest differs',
      'ready inc-a',
      'not ready inc-a: gate profile-admission refused: the gate threw: profile table unreadable',
    ]);
  });

  describe('GPU memory fails closed', () => {
    it('withholds readiness from a worker with vram banks when no admission gate is installed', async () => {
      await publish(rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2, memKind: 'vram' }));
      const tracker = await follow([new MutableGate()]);
      expect(tracker.current).toMatchObject({ ready: false, incarnation: 'inc-a' });
      const reasons = tracker.current.ready ? [] : tracker.current.reasons;
      expect(reasons.map((reason) => reason.kind)).toEqual(['no-admission-gate']);
      expect(reasons[0]).toMatchObject({
        vramBanks: expect.arrayContaining([{ rank: { tpRank: 1, ppRank: 0 }, index: 0 }]),
      });
      expect(seen).toEqual([`not ready inc-a: ${reasons[0]!.message}`]);
      expect(reasons[0]!.message).toMatch(
        /^\d+ vram banks \(the first: bank 0 of rank \(tp 0, pp 0\)\) are served only behind an admission gate, and none is installed \(admissionGate\)$/,
      );
    });

    it('makes a worker with vram banks ready once its admission gate passes', async () => {
      await publish(rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2, memKind: 'vram' }));
      await follow([], new MutableGate());
      expect(seen).toEqual(['ready inc-a']);
    });

    it("gives the failing admission gate's reason for a worker with vram banks", async () => {
      const gate = new MutableGate();
      gate.verdict = { pass: false, reason: 'no declared profile admits vram on this transport' };
      await publish(rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2, memKind: 'vram' }));
      const tracker = await follow([], gate);
      expect(tracker.current.ready ? [] : tracker.current.reasons).toEqual([
        {
          kind: 'gate',
          gate: 'profile-admission',
          message: 'gate profile-admission refused: no declared profile admits vram on this transport',
        },
      ]);
    });

    it('keeps a DRAM-only worker ready without an admission gate', async () => {
      await publish(rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2, memKind: 'dram' }));
      await follow();
      expect(seen).toEqual(['ready inc-a']);
    });
  });

  it('withdraws readiness when a part is withdrawn, when the lease is revoked and when a lease expires', async () => {
    const parts = rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2 });
    await publish(parts);
    await follow();
    await store.delete(rankPartKey({ workerId, incarnation: 'inc-a' }, { tpRank: 1, ppRank: 0 }));
    await until(2);
    await publish(parts);
    await until(3);
    await store.revokeLease(lease);
    await until(4);
    const shortLease = await store.grantLease(2_500);
    await publish(parts, shortLease.id);
    await until(5);
    // Nothing keeps the short lease alive: once its TTL has passed, the next touch of the store expires it.
    under.clock.advance(2_500);
    await store.get(rankPartKey({ workerId, incarnation: 'inc-a' }, { tpRank: 0, ppRank: 0 }));
    await until(6);
    expect(seen).toEqual([
      'ready inc-a',
      'not ready inc-a: missing ranks (tp 1, pp 0)',
      'ready inc-a',
      'not ready -: no valid rank part is published',
      'ready inc-a',
      'not ready -: no valid rank part is published',
    ]);
  });

  it('withdraws exactly the incarnation named', async () => {
    await publish(rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2 }));
    await follow();
    await withdrawRankParts(store, { workerId, incarnation: 'inc-old' });
    await withdrawRankParts(store, { workerId, incarnation: 'inc-a' });
    await until(2);
    expect(seen).toEqual(['ready inc-a', 'not ready -: no valid rank part is published']);
  });

  it('replaces a previous incarnation atomically: no reader ever sees a mix', async () => {
    const old = rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 4 });
    const fresh = rankPartsOf({ workerId, incarnation: 'inc-b', tpSize: 4, generation: 2 });
    await publish(old);
    await follow();
    const prefix = workerPartsPrefix(workerId);
    const { entries, revision } = await store.list(prefix);
    const incarnationByKey = new Map(entries.map((entry) => [entry.key, 'inc-a']));
    const mixes: string[] = [];
    const raw = await store.watch(
      prefix,
      (notice) => {
        if (notice.type !== 'changes') return;
        for (const event of notice.events) {
          if (event.type === 'delete') incarnationByKey.delete(event.key);
          else
            incarnationByKey.set(
              event.entry.key,
              (JSON.parse(new TextDecoder().decode(event.entry.value)) as { part: RankPart }).part.incarnation,
            );
        }
        const incarnations = new Set(incarnationByKey.values());
        if (incarnations.size > 1) mixes.push(`revision ${notice.revision}: ${[...incarnations].join(', ')}`);
      },
      { fromRevision: revision + 1 },
    );
    // The new incarnation claims its epoch, then its ranks come up one at a time, as separate processes would publish them.
    const { epoch } = await claimIncarnationEpoch(store, fresh[0]!);
    await until(2);
    for (const [index, part] of fresh.entries()) {
      await publishRankParts(store, [part], { lease, epoch });
      await until(3 + index);
    }
    await raw.close();
    expect(mixes).toEqual([]);
    expect(seen).toEqual([
      'ready inc-a',
      expect.stringMatching(
        /^not ready inc-b: incarnation inc-a \(epoch \d+\) is superseded by incarnation inc-b \(epoch \d+\), which has published no part yet$/,
      ),
      'not ready inc-b: missing ranks (tp 1, pp 0), (tp 2, pp 0), (tp 3, pp 0)',
      'not ready inc-b: missing ranks (tp 2, pp 0), (tp 3, pp 0)',
      'not ready inc-b: missing ranks (tp 3, pp 0)',
      'ready inc-b',
    ]);
    expect([...new Set(incarnationByKey.values())]).toEqual(['inc-b']);
  });

  it('never reports an older incarnation ready once a newer epoch exists, whatever the older one writes later', async () => {
    const old = rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2 });
    const fresh = rankPartsOf({ workerId, incarnation: 'inc-b', tpSize: 2, generation: 2 });
    const oldClaim = await claimIncarnationEpoch(store, old[0]!);
    await publishRankParts(store, old, { lease, epoch: oldClaim.epoch });
    await follow();
    const freshClaim = await claimIncarnationEpoch(store, fresh[0]!);
    await publishRankParts(store, fresh, { lease, epoch: freshClaim.epoch });
    await until(3);
    // A zombie of inc-a: its fenced publication and a new claim are refused...
    await expect(publishRankParts(store, old, { lease, epoch: oldClaim.epoch })).rejects.toMatchObject({
      code: 'SUPERSEDED',
    });
    await expect(claimIncarnationEpoch(store, old[0]!)).rejects.toMatchObject({
      code: 'SUPERSEDED',
      incarnation: 'inc-a',
    });
    // ...and parts it writes around the fence (raw puts) never make it ready again.
    const recorder = await recordWatch(store, workerPartsPrefix(workerId));
    for (const part of old)
      await store.put(rankPartKey(part, part.parallel), encodeRankPartRecord(part, oldClaim.epoch), { lease });
    await recorder.until('the raw writes', (notices) => changeLog(notices).length === old.length);
    await recorder.watch.close();
    await watch?.settled();
    // A reader that joins now, seeing both incarnations' parts, agrees.
    const late: string[] = [];
    const lateWatch = await watchWorkerReadiness(store, workerId, {
      onChange: (readiness) => late.push(summary(readiness)),
    });
    await lateWatch.close();
    expect(late).toEqual(['ready inc-b']);
    // With the newer parts withdrawn, only the superseded ones are left: still not ready.
    await withdrawRankParts(store, { workerId, incarnation: 'inc-b' });
    await until(4);
    const superseded = `not ready inc-b: incarnation inc-a (epoch ${oldClaim.epoch}) is superseded by incarnation inc-b (epoch ${freshClaim.epoch}), which has published no part yet`;
    expect(seen).toEqual(['ready inc-a', superseded, 'ready inc-b', superseded]);
  });

  it('logs each write of a part that contradicts the fence once, remembering only the writes still stored', async () => {
    const [tp0] = rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 1 }) as [RankPart];
    const key = rankPartKey(tp0, tp0.parallel);
    const restorable = withWatchListener(store);
    watch = await watchWorkerReadiness(restorable.store, workerId, {
      onChange: (readiness) => seen.push(summary(readiness)),
      logger: { warn: (message) => warnings.push(message) },
    });
    const putLogged = async (count: number) => {
      await store.put(key, encodeRankPartRecord(tp0, 7), { lease });
      await vi.waitFor(() => expect(warnings.length).toBeGreaterThanOrEqual(count), { timeout: 20_000, interval: 5 });
      await watch?.settled();
      expect(warnings).toHaveLength(count);
      return (await store.get(key))!;
    };
    const first = await putLogged(1);
    const second = await putLogged(2);
    const shownAgain = async (entry: DiscoveryEntry) => {
      restorable.notify({
        type: 'resync',
        reason: 'the store was restored from a backup',
        snapshot: { revision: entry.modRevision, entries: [entry] },
      });
      await watch?.settled();
      return warnings.length;
    };
    // The write still stored is remembered: shown again, it is not logged again.
    expect(await shownAgain(second)).toBe(2);
    // The first write was overwritten and forgotten: a store restored from a backup that shows it again logs it anew.
    expect(await shownAgain(first)).toBe(3);
    expect(warnings[2]).toContain('claims epoch 7, and the worker has no epoch fence');
  });

  it('lets the ranks of a new incarnation publish at the same time without deleting each other', async () => {
    await publish(rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 4 }));
    await follow();
    const fresh = rankPartsOf({ workerId, incarnation: 'inc-b', tpSize: 4 });
    await Promise.all(fresh.map((part) => publish([part])));
    await vi.waitFor(() => expect(seen.at(-1)).toBe('ready inc-b'), { timeout: 20_000, interval: 5 });
    const { entries } = await store.list(workerPartsPrefix(workerId));
    expect(entries.map((entry) => entry.key.slice(workerPartsPrefix(workerId).length))).toEqual([
      'inc-b/pp0-tp0',
      'inc-b/pp0-tp1',
      'inc-b/pp0-tp2',
      'inc-b/pp0-tp3',
    ]);
  });

  it('refuses malformed, tampered, wrong-version and misplaced parts with a logged reason; they never count', async () => {
    const [tp0, tp1] = rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2 }) as [RankPart, RankPart];
    await publish([tp0]);
    const { epoch } = await claimIncarnationEpoch(store, tp0);
    await follow();
    const tp1Key = rankPartKey({ workerId, incarnation: 'inc-a' }, { tpRank: 1, ppRank: 0 });
    const good = JSON.parse(encodeRankPartRecord(tp1, epoch)) as { version: number; part: { role: string } };
    const bad = [
      'not json at all',
      JSON.stringify({ ...good, part: { ...good.part, role: 'prefill' } }),
      JSON.stringify({ ...good, version: 9 }),
      encodeRankPartRecord(tp0, epoch),
    ];
    for (const value of bad) await store.put(tp1Key, value, { lease });
    await store.put(
      rankPartKey({ workerId, incarnation: 'inc-a' }, { tpRank: 0, ppRank: 0 }),
      encodeRankPartRecord(tp0, epoch),
      { lease },
    );
    await vi.waitFor(() => expect(warnings.length).toBe(bad.length), { timeout: 20_000, interval: 5 });
    await watch?.settled();
    expect(seen).toEqual(['not ready inc-a: missing ranks (tp 1, pp 0)']);
    expect(warnings.map((warning) => /\((\w[\w-]*)\)/.exec(warning)?.[1])).toEqual([
      'malformed',
      'tampered',
      'wrong-version',
      'misplaced',
    ]);
    expect(warnings[0]).toMatch(
      /worker decode-7: rank part at "kvreuse\/workers\/decode-7\/incarnations\/inc-a\/pp0-tp1" refused/,
    );
    await store.put(tp1Key, encodeRankPartRecord(tp1, epoch), { lease });
    await until(2);
    expect(seen.at(-1)).toBe('ready inc-a');
  });
});
