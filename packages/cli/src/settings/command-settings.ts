import {
  describeUnknownSetting,
  findSettingsFile,
  type FoundSettingsFile,
  type ResolveOptions,
  type SettingsDefinition,
} from '@kvreuse/config';
import { resolve } from 'node:path';
import { kvreuseSettings, type ResolvedSettings, type Settings } from './all-settings.js';
import type { CommandArgs, OptionSpec } from '../args.js';
import type { CliContext } from '../command.js';
import { discoveryFilesFrom } from '../discovery.js';

/** `--config <file>`: the settings file of every command that resolves settings. */
export const configOption: OptionSpec = {
  name: 'config',
  value: '<file>',
  description:
    'settings file (YAML, or JSON when it ends in .json); else KVREUSE_CONFIG, else ./kvreuse.yaml if present',
};

/** `--strict`: an unknown `KVREUSE_*` variable is an error rather than a warning. */
export const strictOption: OptionSpec = {
  name: 'strict',
  description: 'refuse an unknown KVREUSE_* variable (by default it is named in a warning on stderr and ignored)',
};

/** The options of every command that resolves settings. */
export const settingsOptions: readonly OptionSpec[] = [configOption, strictOption];

/** The settings file of a command: `--config`, else `KVREUSE_CONFIG`, else `./kvreuse.yaml` if present. */
export function settingsFileOf(args: CommandArgs, context: CliContext): FoundSettingsFile | undefined {
  const [option] = args.options.get('config') ?? [];
  return findSettingsFile({ option, env: context.env, cwd: context.cwd });
}

const namedBy = { option: '--config', env: 'KVREUSE_CONFIG', cwd: './kvreuse.yaml' } as const;
/** What a command looks for when no settings file is named. */
export const noSettingsFile = 'no --config, KVREUSE_CONFIG or ./kvreuse.yaml';

/** A settings file and what named it (`/etc/kvreuse.yaml (KVREUSE_CONFIG)`), or that there is none. */
export function describeSettingsFile(file: FoundSettingsFile | undefined): string {
  return file === undefined ? `none (${noSettingsFile})` : `${file.path} (${namedBy[file.from]})`;
}

/** What a command resolves its settings from; `file` when it has one to fall back on (the demo's example). */
export function settingsSources(args: CommandArgs, context: CliContext, fallback?: string): ResolveOptions {
  const file = settingsFileOf(args, context)?.path ?? fallback;
  return {
    ...(file === undefined ? {} : { file }),
    env: context.env,
    argv: args.settingsArgv,
    unknownEnv: args.options.has('strict') ? 'error' : 'warn',
  };
}

/** One warning on stderr for the `KVREUSE_*` variables a resolution ignored as unknown, each with the closest name. */
export function warnUnknownEnv(resolved: Pick<ResolvedSettings, 'unknownEnv'>, context: CliContext): void {
  if (resolved.unknownEnv.length === 0) return;
  context.stderr(
    `kvreuse: warning: ${resolved.unknownEnv.length} unknown KVREUSE_* variable(s) ignored (--strict refuses them):\n` +
      resolved.unknownEnv.map((unknown) => `  - ${describeUnknownSetting(unknown)}\n`).join(''),
  );
}

/** Every kvreuse setting, from default < settings file < `KVREUSE_*` environment < setting flags; unknown variables warned about. */
export function resolveCommandSettings(args: CommandArgs, context: CliContext, fallback?: string): ResolvedSettings {
  const resolved = kvreuseSettings.resolve(settingsSources(args, context, fallback));
  warnUnknownEnv(resolved, context);
  return resolved;
}

/** The settings with every file they name (discovery's, `profile.file`) taken from the command's working directory. */
export function settingsFilesFrom(settings: Settings, cwd: string): Settings {
  const { file } = settings.profile;
  return {
    ...settings,
    discovery: discoveryFilesFrom(settings.discovery, cwd),
    profile: { ...settings.profile, file: file === '' ? '' : resolve(cwd, file) },
  };
}

/** The settings part of a command's help: where settings come from, then the flags of the groups it reads. */
export function settingsHelp(groups: SettingsDefinition<readonly any[]>): string {
  return `settings (any kvreuse setting is accepted; the ones this command reads):\n${groups.renderHelp()}`;
}
