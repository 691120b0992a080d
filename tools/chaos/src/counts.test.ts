import { describe, expect, it } from 'vitest';
import { OutcomeCounts } from './counts.js';

describe('OutcomeCounts', () => {
  it('counts each fault kind’s outcomes, in the kinds’ order, and the runs that failed a check', () => {
    const counts = new OutcomeCounts();
    counts.add('lock-sqlite', 'verified-full');
    counts.add('kill-decode', 'recomputed');
    counts.add('kill-decode', 'typed-failure');
    counts.add('kill-decode', 'recomputed');
    expect(counts.failed).toBe(0);
    counts.add('lock-sqlite', 'hang');
    counts.add('kill-prefill', 'setup-failed');
    expect(counts.render()).toEqual([
      'kill-decode     3 runs: recomputed 2, typed-failure 1',
      'kill-prefill    1 runs: setup-failed 1',
      'lock-sqlite     2 runs: hang 1, verified-full 1',
    ]);
    expect(counts.failed).toBe(2);
  });

  it('counts, per fault kind, the runs that quarantined, their operations and the banks those held back', () => {
    const counts = new OutcomeCounts();
    counts.add('stop-over-tcp', 'recomputed', { operations: 2, banksRetained: 56 });
    counts.add('stop-over-tcp', 'recomputed', { operations: 0, banksRetained: 0 });
    counts.add('stop-over-tcp', 'verified-full');
    counts.add('stop-over-tcp', 'recomputed', { operations: 1, banksRetained: 56 });
    counts.add('stop-rank', 'verified-full');
    expect(counts.render()).toEqual([
      'stop-rank       1 runs: verified-full 1',
      'stop-over-tcp   4 runs: recomputed 3, verified-full 1; quarantined in 2 runs: 3 operations, 112 banks retained',
    ]);
  });
});
