import { join } from 'node:path';
import { kvreuseSettings } from '@kvreuse/config';
import type { CommandArgs, OptionSpec } from './args.js';
import type { CliContext, Command } from './command.js';
import { requireCheckout, runInCheckout } from './checkout.js';
import { UsageError } from './errors.js';
import { settingsHelp } from './settings.js';

const dryRunOption: OptionSpec = { name: 'dry-run', description: 'print the command it would run in the checkout, and run nothing' };

function runOrShow(root: string, argv: readonly string[], args: CommandArgs, context: CliContext): void {
  const [command, ...rest] = argv as [string, ...string[]];
  if (args.options.has('dry-run')) {
    context.stdout(`in ${root}: ${argv.join(' ')}\n`);
    return;
  }
  runInCheckout(root, command, rest, context);
}

export const bench: Command = {
  name: 'bench',
  summary: "Runs every benchmark of the repository with its anchors (the checkout's `npm run bench`) and merges the figures; runs from a checkout.",
  usage: '[--write-docs] [--dry-run]',
  options: [{ name: 'write-docs', description: 'also rewrite the figures table of docs/benchmarks.md' }, dryRunOption],
  help: () =>
    "It installs what the benchmarks need, builds, runs each package's benchmarks one at a time and merges their figures into bench/results.json (git-ignored).\n",
  async run(args, context) {
    const extra = [...args.positionals, ...args.settingsArgv];
    if (extra.length > 0) throw new UsageError(this.name, `unexpected argument ${JSON.stringify(extra[0])}`);
    const root = requireCheckout(this.name, context);
    const writeDocs = args.options.has('write-docs') ? ['--write-docs'] : [];
    runOrShow(root, [process.execPath, join(root, 'scripts', 'dev.mjs'), 'bench', ...writeDocs], args, context);
  },
};

export const demo: Command = {
  name: 'demo',
  summary:
    "Runs the repository's main job (tools/demo: resolves the settings, checks the example Qwen3-0.6B workers, plans a 42-block pull); runs from a checkout. The cross-process demo comes with the endpoint.",
  usage: '[--dry-run] [setting flags]',
  options: [dryRunOption],
  help: () => `The setting flags and KVREUSE_* variables go to the main job, on top of its bundled example settings file.\n\n${settingsHelp(kvreuseSettings)}`,
  async run(args, context) {
    if (args.positionals.length > 0) throw new UsageError(this.name, `unexpected argument ${JSON.stringify(args.positionals[0])}`);
    // The flags and variables are checked here first, so that a mistake is one line and exit 2, as everywhere.
    kvreuseSettings.resolve({ env: context.env, argv: args.settingsArgv });
    const root = requireCheckout(this.name, context);
    const tsx = join(root, 'node_modules', 'tsx', 'dist', 'cli.mjs');
    runOrShow(root, [process.execPath, tsx, '--conditions=@kvreuse/source', join(root, 'tools', 'demo', 'src', 'demo.ts'), ...args.settingsArgv], args, context);
  },
};
