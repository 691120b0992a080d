/**
 * The kvreuse binary: resolved settings with their sources, deployment profiles and their admission, what discovery holds, the benchmarks and the main job.
 *
 * @packageDocumentation
 * @module \@kvreuse/cli
 */
export type { CliContext } from './command.js';
export {
  brokenPipeStatus,
  type InterruptCleanups,
  interruptCleanups,
  type SignalledProcess,
  type WhenInterrupted,
} from './interrupts.js';
export type { CliErrorCode } from './errors.js';
export { cliVersion, exitCodeOf, runCli } from './run.js';
export { type InventorySummary, summarizeInventoryBatch } from './inventory-summary.js';
export {
  allGroups,
  catalog,
  defaultSettings,
  describeSetting,
  kvreuseSettings,
  resolveSettings,
  safeResolveSettings,
  settingDescriptions,
  type GroupName,
  type ResolvedSettings,
  type SafeResolveResult,
  type SettingPath,
  type Settings,
  type SettingsProvenance,
} from './settings/all-settings.js';
export { exampleSettingsPath } from './settings/example.js';
export { frontendGroup } from './settings/frontend.js';
