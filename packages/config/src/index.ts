/**
 * The settings mechanism of kvreuse: groups declared by each package, composed and resolved explicitly from defaults, file, environment and argv.
 *
 * @packageDocumentation
 * @module \@kvreuse/config
 */
export { COERCION_RULES } from './coerce.js';
export type { ForeignGroupsPolicy } from './composition.js';
export {
  defineSettings,
  type DefineSettingsOptions,
  type ProvenanceOf,
  type Resolved,
  type SafeResolved,
  type SettingPathOf,
  type SettingsDefinition,
  type SettingsOf,
} from './define-settings.js';
export {
  formatValue,
  type GroupDescription,
  type RuleDescription,
  type SettingDescription,
  type ValueJsonSchema,
} from './descriptions.js';
export type { DocsOptions } from './docs.js';
export { closestName } from './names.js';
export {
  ConfigArgumentError,
  describeInvalidSetting,
  describeProvenance,
  describeUnknownSetting,
  InvalidCompositionError,
  InvalidGroupError,
  InvalidSettingError,
  isConfigError,
  isSettingsError,
  ResolveOptionsError,
  SettingsFileError,
  UnknownSettingError,
  type ConfigError,
  type ConfigErrorCode,
  type InvalidSetting,
  type Provenance,
  type RelatedSetting,
  type SettingSource,
  type SettingsError,
  type UnknownSetting,
} from './errors.js';
export {
  defineGroup,
  isSettingsGroup,
  type GroupDeclaration,
  type GroupRule,
  type GroupValues,
  type SettingDeclaration,
  type SettingDeclarations,
  type SettingsGroup,
} from './group.js';
export type { HelpOptions } from './help.js';
export type { ResolveOptions, SettingsEnv, UnknownEnvPolicy } from './resolve-options.js';
export { renderSettingsReport, type ResolutionToReport } from './settings-report.js';
export {
  findSettingsFile,
  loadSettingsFile,
  SETTINGS_FILE_NAME,
  SETTINGS_FILE_VARIABLE,
  type FoundSettingsFile,
  type LoadedSettingsFile,
  type SectionLines,
  type SettingsFileFormat,
  type SettingsFileInput,
} from './settings-file.js';
export type { IgnoredSetting } from './sources.js';
export { readTextFile, TEXT_FILE_MAX_BYTES, type TextFileReading } from './text-file.js';
