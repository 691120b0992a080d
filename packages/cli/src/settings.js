import { resolve } from 'node:path';
import { kvreuseSettings } from '@kvreuse/config';
/** `--config <file>`: the settings file of every command that resolves settings. */
export const configOption = { name: 'config', value: '<file>', description: 'settings file (YAML, or JSON when it ends in .json)' };
/** The file `--config` names, against the working directory; undefined without one. */
export function settingsFileOf(args, context) {
    const [file] = args.options.get('config') ?? [];
    return file === undefined ? undefined : resolve(context.cwd, file);
}
/** Every kvreuse setting, from default < `--config` file < `KVREUSE_*` environment < setting flags. */
export function resolveCommandSettings(args, context) {
    const file = settingsFileOf(args, context);
    return kvreuseSettings.resolve({ ...(file === undefined ? {} : { file }), env: context.env, argv: args.settingsArgv });
}
/** The settings part of a command's help: where settings come from, then the flags of the groups it reads. */
export function settingsHelp(groups) {
    return `settings (any kvreuse setting is accepted; the ones this command reads):\n${groups.renderHelp()}`;
}
