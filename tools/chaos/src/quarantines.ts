// The invariant "banks touched by an unfinished operation stay retained until proven terminal", checked on
// what a rank process reported: its `quarantined` and `quiesced` messages (an operation past its abandon
// deadline unfinished, and its end once the native layer proved it terminal) and its drain report.
import type { RankDrain, RankMessage } from '@kvreuse/cli/internal';
import { ChaosInvariantError } from './errors.js';

/** What one process's quarantines came to. */
export interface QuarantineTally {
  /** Operations it quarantined. */
  readonly operations: number;
  /** The most banks its quarantines held back at once (operations of one pull share their banks). */
  readonly banksRetained: number;
  /** Quarantined operations it later reported proven terminal. */
  readonly provenTerminal: number;
}

type Quarantined = Extract<RankMessage, { type: 'quarantined' }>;
type Quiesced = Extract<RankMessage, { type: 'quiesced' }>;

/**
 * Checks one surviving process: every quarantine held back every bank its operation touches; a pull
 * with a quarantined read committed nothing; only quarantined operations are reported proven terminal;
 * and those never proven terminal are exactly the drain's quarantined ones, whose banks it retained with
 * its agent kept. Throws ChaosInvariantError naming the run's seed.
 */
export function checkQuarantines(seed: number, messages: readonly RankMessage[], drain: RankDrain): QuarantineTally {
  const quarantined = messages.filter((message): message is Quarantined => message.type === 'quarantined');
  const quiesced = messages.filter((message): message is Quiesced => message.type === 'quiesced');
  const broken = (invariant: string, evidence: string) =>
    new ChaosInvariantError(seed, invariant, `${drain.process} ${evidence}`);
  for (const operation of quarantined) {
    if (operation.banks === 0 || operation.banksRetained !== operation.banks) {
      throw broken(
        'banks touched by an unfinished operation stay retained',
        `quarantined ${operation.operation} with ${operation.banksRetained} of its ${operation.banks} banks retained`,
      );
    }
  }
  for (const end of quiesced) {
    if (!quarantined.some((operation) => operation.operation === end.operation))
      throw broken(
        'only a quarantined operation is reported proven terminal',
        `reported ${end.operation} terminal, never quarantined`,
      );
  }
  // A pull waits for each of its reads to be quiescent or quarantined: the quarantines reported before
  // its `pulled` are its own, and a quarantined read's bytes count for nothing, so it committed no block.
  let since = 0;
  for (const message of messages) {
    if (message.type === 'quarantined') since++;
    if (message.type !== 'pulled') continue;
    if (since > 0 && message.pull.blocks > 0)
      throw broken(
        'no unverified byte reported as success',
        `quarantined ${since} reads of a pull that reported ${message.pull.blocks} blocks committed`,
      );
    since = 0;
  }
  const unended = quarantined.filter(
    (operation) => !quiesced.some((end) => end.operation === operation.operation),
  ).length;
  const report = drain.drain;
  if (report !== undefined && report.quarantined !== unended) {
    throw broken(
      'banks touched by an unfinished operation stay retained',
      `reported ${unended} quarantined operations never proven terminal, its drain ${report.quarantined}`,
    );
  }
  return {
    operations: quarantined.length,
    banksRetained: Math.max(0, ...quarantined.map((operation) => operation.banksRetained)),
    provenTerminal: quiesced.length,
  };
}
