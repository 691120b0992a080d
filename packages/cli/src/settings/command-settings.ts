import { resolve } from 'node:path';
import { kvreuseSettings, type ResolvedSettings } from './all-settings.js';
import { type SettingsDefinition } from '@kvreuse/config';
import type { CommandArgs, OptionSpec } from '../args.js';
import type { CliContext } from '../command.js';

/** `--config <file>`: the settings file of every command that resolves settings. */
export const configOption: OptionSpec = {
  name: 'config',
  value: '<file>',
  description: 'settings file (YAML, or JSON when it ends in .json)',
};

/** The file `--config` names, against the working directory; undefined without one. */
export function settingsFileOf(args: CommandArgs, context: CliContext): string | undefined {
  const [file] = args.options.get('config') ?? [];
  return file === undefined ? undefined : resolve(context.cwd, file);
}

/** Every kvreuse setting, from default < `--config` file < `KVREUSE_*` environment < setting flags. */
export function resolveCommandSettings(args: CommandArgs, context: CliContext): ResolvedSettings {
  const file = settingsFileOf(args, context);
  return kvreuseSettings.resolve({
    ...(file === undefined ? {} : { file }),
    env: context.env,
    argv: args.settingsArgv,
  });
}

/** The settings part of a command's help: where settings come from, then the flags of the groups it reads. */
export function settingsHelp(groups: SettingsDefinition<readonly any[]>): string {
  return `settings (any kvreuse setting is accepted; the ones this command reads):\n${groups.renderHelp()}`;
}
