// A seed decides a run: the fault, its victim, when it strikes after the pull is sent, and how long it lasts.

export const faultKinds = [
  'kill-decode',
  'kill-prefill',
  'stop-rank',
  'stop-over-tcp',
  'restart-etcd',
  'lock-sqlite',
] as const;
export type FaultKind = (typeof faultKinds)[number];

/** A rank of the demo's workers: a decode rank (tp 0 or 1) or the prefill rank. */
export interface Victim {
  readonly role: 'decode' | 'prefill';
  readonly tpRank: number;
}

export interface Scenario {
  readonly seed: number;
  readonly kind: FaultKind;
  /** The rank the fault hits (kill, stop); absent for faults of discovery (etcd, SQLite). */
  readonly victim?: Victim;
  /**
   * Milliseconds after the pull command is sent; 0 for `stop-over-tcp`, which strikes once the prefill's
   * reads are in flight (on a decode rank, once they are seen; on the prefill, right after it posts them).
   */
  readonly atMs: number;
  /** How long a stop, an etcd outage or a held lock lasts; 0 for a kill. */
  readonly forMs: number;
}

/** The window after the pull is sent in which the fault strikes: a demo-sized pull on a loaded machine lasts about this long. */
export const faultWindowMs = 1_500;

/** mulberry32: a small, well-mixed 32-bit generator, the same on every machine. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/**
 * The scenario of `seed`. `abandonTimeoutMs` is the transport's: a stopped rank stays stopped longer
 * than it (by 0.5 to 4.5 s), so that the operations and pins it holds up reach their abandon deadline,
 * and some stops outlast the rank's lease too.
 */
export function scenarioOf(seed: number, abandonTimeoutMs: number): Scenario {
  const next = generator(seed);
  const pick = (n: number): number => Math.floor(next() * n);
  const kind = faultKinds[pick(faultKinds.length)] as FaultKind;
  const atMs = pick(faultWindowMs);
  switch (kind) {
    case 'kill-decode':
      return { seed, kind, victim: { role: 'decode', tpRank: pick(2) }, atMs, forMs: 0 };
    case 'kill-prefill':
      return { seed, kind, victim: { role: 'prefill', tpRank: 0 }, atMs, forMs: 0 };
    case 'stop-rank': {
      const victim: Victim = pick(3) === 2 ? { role: 'prefill', tpRank: 0 } : { role: 'decode', tpRank: pick(2) };
      return { seed, kind, victim, atMs, forMs: abandonTimeoutMs + 500 + pick(4_000) };
    }
    case 'stop-over-tcp': {
      const victim: Victim = pick(2) === 1 ? { role: 'prefill', tpRank: 0 } : { role: 'decode', tpRank: pick(2) };
      return { seed, kind, victim, atMs: 0, forMs: abandonTimeoutMs + 500 + pick(4_000) };
    }
    case 'restart-etcd':
      return { seed, kind, atMs, forMs: 500 + pick(2_500) };
    case 'lock-sqlite':
      return { seed, kind, atMs, forMs: 500 + pick(3_500) };
  }
}

export function describeScenario(scenario: Scenario): string {
  const victim = scenario.victim === undefined ? '' : ` ${scenario.victim.role}/tp${scenario.victim.tpRank}`;
  const lasting = scenario.forMs === 0 ? '' : ` for ${scenario.forMs} ms`;
  const when =
    scenario.kind !== 'stop-over-tcp'
      ? `at ${scenario.atMs} ms`
      : scenario.victim?.role === 'prefill'
        ? 'right after its posts'
        : 'once reading';
  return `seed ${scenario.seed}: ${scenario.kind}${victim} ${when}${lasting}`;
}
