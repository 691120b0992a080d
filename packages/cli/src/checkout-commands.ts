import { join } from 'node:path';
import type { CommandArgs, OptionSpec } from './args.js';
import type { CliContext, Command } from './command.js';
import { requireCheckout, runInCheckout } from './checkout.js';
import { UsageError } from './errors.js';

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
