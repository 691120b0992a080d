import type { CommandArgs, OptionSpec } from './args.js';

export const jsonOption: OptionSpec = { name: 'json', description: 'print machine-readable JSON on stdout' };

export function wantsJson(args: CommandArgs): boolean {
  return args.options.has('json');
}
