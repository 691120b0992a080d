import type { RankDrain, RankMessage } from '@kvreuse/cli/internal';
import { describe, expect, it } from 'vitest';
import { ChaosInvariantError } from './errors.js';
import { checkQuarantines } from './quarantines.js';

const said = { role: 'prefill', tpRank: 0 } as const;
const quarantined = (operation: string, banksRetained = 56): RankMessage => ({
  ...said,
  type: 'quarantined',
  operation,
  banks: 56,
  banksRetained,
});
const quiesced = (operation: string, banksRetained: number): RankMessage => ({
  ...said,
  type: 'quiesced',
  operation,
  terminal: 'cancelled',
  code: 'CANCELED',
  bytesDone: 0,
  banksRetained,
});
const pulled = (blocks: number): RankMessage => ({
  ...said,
  type: 'pulled',
  pull: {
    requested: 42,
    blocks,
    bytes: 0,
    verified: true,
    verify: 'full',
    memory: 'dram',
    checkedBlocks: blocks,
    ms: 1,
    gbitPerS: 0,
    recomputed: { blocks: 42 - blocks, reasons: blocks === 42 ? [] : ['from block 0: …'] },
  },
});
const drainOf = (quarantinedAtDrain: number, banksRetained: number): RankDrain => ({
  process: 'chaos-prefill/tp0',
  pid: 1,
  exitCode: quarantinedAtDrain === 0 ? 0 : 1,
  signal: null,
  drain: {
    banksReturned: 56 - banksRetained,
    banksRetained,
    quarantined: quarantinedAtDrain,
    agentDestroyed: quarantinedAtDrain === 0,
    pins: { waitedFor: 0, released: 0, lapsed: 0, outstanding: 0, held: [] },
    steps: [],
  },
});

function refusal(run: () => unknown): ChaosInvariantError {
  try {
    run();
  } catch (error) {
    if (error instanceof ChaosInvariantError) return error;
    throw error;
  }
  throw new Error('not refused');
}

describe('checkQuarantines', () => {
  it('tallies quarantines proven terminal before the drain, and those the drain still held', () => {
    const ended = [
      quarantined('p#1'),
      quarantined('p#2'),
      pulled(0),
      quiesced('p#1', 56),
      quiesced('p#2', 0),
      pulled(42),
    ];
    expect(checkQuarantines(9, ended, drainOf(0, 0))).toEqual({ operations: 2, banksRetained: 56, provenTerminal: 2 });
    expect(checkQuarantines(9, [quarantined('p#1'), pulled(0)], drainOf(1, 56))).toEqual({
      operations: 1,
      banksRetained: 56,
      provenTerminal: 0,
    });
    expect(checkQuarantines(9, [pulled(42)], drainOf(0, 0))).toEqual({
      operations: 0,
      banksRetained: 0,
      provenTerminal: 0,
    });
  });

  it.each([
    [
      'a quarantine that left banks in service',
      [quarantined('p#1', 55), pulled(0)],
      drainOf(1, 56),
      'banks touched by an unfinished operation stay retained: chaos-prefill/tp0 quarantined p#1 with 55 of its 56 banks retained',
    ],
    [
      'a pull that committed blocks while one of its reads was quarantined',
      [quarantined('p#1'), pulled(3)],
      drainOf(1, 56),
      'no unverified byte reported as success: chaos-prefill/tp0 quarantined 1 reads of a pull that reported 3 blocks committed',
    ],
    [
      'an end reported for an operation never quarantined',
      [pulled(42), quiesced('p#7', 0)],
      drainOf(0, 0),
      'only a quarantined operation is reported proven terminal: chaos-prefill/tp0 reported p#7 terminal, never quarantined',
    ],
    [
      'a drain that counts none of the operations never proven terminal',
      [quarantined('p#1'), pulled(0)],
      drainOf(0, 0),
      'chaos-prefill/tp0 reported 1 quarantined operations never proven terminal, its drain 0',
    ],
  ])('refuses %s', (_, messages, drain, message) => {
    expect(refusal(() => checkQuarantines(9, messages, drain)).message).toContain(message);
  });
});
