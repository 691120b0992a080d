export { catalog, crossFieldRules } from './catalog.js';
export type { CrossFieldRule, GroupName, SettingDeclaration, SettingPath, Settings } from './catalog.js';
export {
  describeSetting,
  formatValue,
  settingDescriptions,
  settingGroups,
  type GroupDescription,
  type SettingDescription,
  type ValueJsonSchema,
} from './descriptions.js';
export { COERCION_RULES } from './coerce.js';
export { describeValue } from './describe-value.js';
export { DOCS_COMMAND, renderConfigDocs } from './docs.js';
export {
  describeInvalidSetting,
  describeProvenance,
  InvalidSettingError,
  isSettingsError,
  ResolveOptionsError,
  SettingsFileError,
  UnknownSettingError,
  type InvalidSetting,
  type Provenance,
  type RelatedSetting,
  type SettingSource,
  type SettingsError,
  type UnknownSetting,
} from './errors.js';
export { exampleSettingsPath } from './example.js';
export { renderSettingsHelp, type HelpOptions } from './help.js';
export { settingsJsonSchema } from './json-schema.js';
export { renderSettingsReport } from './settings-report.js';
export {
  defaultSettings,
  resolveSettings,
  safeResolveSettings,
  type ResolvedSettings,
  type ResolveSettingsOptions,
  type SafeResolveResult,
  type SettingsEnv,
  type SettingsProvenance,
} from './resolve.js';
export { loadSettingsFile, type LoadedSettingsFile, type SettingsFileFormat, type SettingsFileInput } from './settings-file.js';
