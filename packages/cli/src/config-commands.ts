import { kvreuseSettings } from './settings/all-settings.js';
import { renderSettingsReport } from '@kvreuse/config';
import { SettingsNotValidError, UsageError } from './errors.js';
import type { Command } from './command.js';
import { dataOptions, documentFormatOf, renderDocument } from './output.js';
import {
  describeSettingsFile,
  resolveCommandSettings,
  settingsFileOf,
  settingsHelp,
  settingsOptions,
  settingsSources,
  warnUnknownEnv,
} from './settings/command-settings.js';
import { problemLines } from './error-text.js';

function noPositionals(command: string, positionals: readonly string[]): void {
  if (positionals.length > 0) throw new UsageError(command, `unexpected argument ${JSON.stringify(positionals[0])}`);
}

/** The usage, options and help of a command that resolves every setting from a file, the environment and flags. */
const readsEverySetting = {
  usage: '[--config <file>] [--strict] [-o table|json|yaml] [setting flags]',
  options: [...settingsOptions, ...dataOptions],
  help: () => settingsHelp(kvreuseSettings),
} as const;

export const configShow: Command = {
  name: 'config show',
  summary:
    'Every resolved setting and where its value came from: a file line, a KVREUSE_* variable, a flag, or the default.',
  ...readsEverySetting,
  async run(args, context) {
    noPositionals(this.name, args.positionals);
    const format = documentFormatOf(this.name, args);
    const resolved = resolveCommandSettings(args, context);
    const file = settingsFileOf(args, context);
    if (format !== undefined) {
      context.stdout(
        renderDocument(format, {
          file: file ?? null,
          settings: resolved.settings,
          provenance: resolved.provenance,
          ignored: resolved.ignored,
        }),
      );
    } else {
      context.stdout(`settings file: ${describeSettingsFile(file)}\n${renderSettingsReport(resolved)}`);
    }
  },
};

export const configValidate: Command = {
  name: 'config validate',
  summary:
    'Checks a settings file together with the KVREUSE_* environment and the setting flags, and prints every problem.',
  ...readsEverySetting,
  async run(args, context) {
    noPositionals(this.name, args.positionals);
    const format = documentFormatOf(this.name, args);
    const file = settingsFileOf(args, context);
    const result = kvreuseSettings.safeResolve(settingsSources(args, context));
    if (result.success) warnUnknownEnv(result.data, context);
    const problems = result.success ? [] : problemLines(result.error);
    if (format !== undefined) {
      context.stdout(
        renderDocument(format, {
          valid: result.success,
          ...(result.success ? {} : { code: result.error.code }),
          problems,
        }),
      );
    } else if (result.success) {
      context.stdout(`valid: ${file === undefined ? 'no settings file' : file.path}, the environment and the flags\n`);
    } else {
      context.stdout(`${problems.join('\n')}\n`);
    }
    if (!result.success) throw new SettingsNotValidError(problems.length, { cause: result.error });
  },
};

export const configSchema: Command = {
  name: 'config schema',
  summary: 'The JSON Schema (draft 2020-12) of a settings file holding any kvreuse setting, for editors.',
  usage: '',
  options: [],
  help: () => '',
  async run(args, context) {
    noPositionals(this.name, args.positionals);
    if (args.settingsArgv.length > 0)
      throw new UsageError(this.name, `unexpected argument ${JSON.stringify(args.settingsArgv[0])}`);
    context.stdout(`${JSON.stringify(kvreuseSettings.jsonSchema, null, 2)}\n`);
  },
};
