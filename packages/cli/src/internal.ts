/**
 * The demo's rank processes, the messages they exchange and the errors they throw, for the repository's
 * own tools that drive them through faults of their own (the chaos runs). Not part of the public API: it
 * changes with the demo.
 *
 * @module \@kvreuse/cli/internal
 */
export { CliError, DemoMessageError, DemoProcessError } from './errors.js';
export {
  RankProcesses,
  type RankDrain,
  type RankProcess,
  type RankProcessesOptions,
  type RankSpec,
} from './demo/rank-processes.js';
export type {
  DrainSummary,
  HintLine,
  PullPrediction,
  PullReport,
  RankCommand,
  RankMessage,
  RankRole,
} from './demo/rank-messages.js';
