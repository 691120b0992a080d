import { join, resolve } from 'node:path';
import type { CommandArgs, OptionSpec } from './args.js';
import type { CliContext, Command } from './command.js';
import { requireCheckout, runInCheckout } from './checkout.js';
import { UsageError } from './errors.js';
import { requireUcx } from './native.js';
import { resolveCommandSettings } from './settings/command-settings.js';

const dryRunOption: OptionSpec = {
  name: 'dry-run',
  description: 'print the command it would run in the checkout, and run nothing',
};

function runOrShow(
  root: string,
  argv: readonly string[],
  env: Readonly<Record<string, string>>,
  args: CommandArgs,
  context: CliContext,
): void {
  const [command, ...rest] = argv as [string, ...string[]];
  if (args.options.has('dry-run')) {
    const assignments = Object.entries(env).map(([name, value]) => `${name}=${value} `);
    context.stdout(`in ${root}: ${assignments.join('')}${argv.join(' ')}\n`);
    return;
  }
  runInCheckout(root, command, rest, context, env);
}

export const bench: Command = {
  name: 'bench',
  summary:
    "Runs every benchmark of the repository with its anchors (the checkout's `npm run bench`) and merges the figures; runs from a checkout (from an installed package: bench link).",
  usage: '[--write-docs] [--dry-run] [--transport-library <file>]',
  options: [
    {
      name: 'write-docs',
      description:
        'also rewrite the figures table of docs/benchmarks.md and the bandwidth chart docs/bench-bandwidth.svg',
    },
    dryRunOption,
  ],
  help: () =>
    "It installs what the benchmarks need, builds, runs each package's benchmarks one at a time and merges their figures into bench/results.json (git-ignored).\n" +
    'The benchmarks run on UCX: it first checks that the native library (transport.library, else the built one) loads and has the ucx backend, and says what is missing otherwise.\n',
  async run(args, context) {
    if (args.positionals.length > 0)
      throw new UsageError(this.name, `unexpected argument ${JSON.stringify(args.positionals[0])}`);
    const root = requireCheckout(
      this.name,
      context,
      'From the installed package, kvreuse bench link measures the link between two hosts over UCX (see kvreuse bench link --help)',
    );
    const resolved = resolveCommandSettings(args, context);
    const { settings } = resolved;
    requireUcx(this.name, resolved, context.cwd);
    const writeDocs = args.options.has('write-docs') ? ['--write-docs'] : [];
    // The benchmarks run in the checkout's root and read the library from the environment, not the settings.
    const { library } = settings.transport;
    const env = library === '' ? {} : { KVREUSE_TRANSPORT_LIBRARY: resolve(context.cwd, library) };
    const argv = [process.execPath, join(root, 'scripts', 'dev.mjs'), 'bench', ...writeDocs];
    runOrShow(root, argv, env, args, context);
  },
};
