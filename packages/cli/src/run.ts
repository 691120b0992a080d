import { readFileSync } from 'node:fs';
import { isConfigError } from '@kvreuse/config';
import { CleanupFailedError } from '@kvreuse/errors';
import { ProfileAdmissionError } from '@kvreuse/profile-admission';
import {
  ClusterSecretError,
  DiscoveryAuthenticationError,
  DiscoveryCredentialsFileError,
  DiscoverySettingsError,
  DiscoveryTlsError,
} from '@kvreuse/discovery';
import { splitArgs } from './args.js';
import { renderCommandHelp, type CliContext, type Command } from './command.js';
import { commands } from './commands.js';
import { CliError, UnknownCommandError } from './errors.js';
import { errorText } from './error-text.js';

/** The version of this package, as the binary's `--version` prints it. */
export const cliVersion: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** Every command by its words: `config show` → configShow. */
const byName = new Map(commands.map((command) => [command.name, command]));
const topLevel = [...new Set(commands.map((command) => command.name.split(' ')[0]!))];

function renderTopHelp(): string {
  const width = Math.max(...commands.map((command) => command.name.length));
  return [
    'usage: kvreuse <command> [options] [setting flags]',
    '',
    'commands:',
    ...commands.map((command) => `  ${command.name.padEnd(width)}  ${command.summary}`),
    '',
    'Every command takes --help; setting flags, KVREUSE_* variables and --config <file> are described there.',
    'kvreuse --version prints the version.',
    '',
  ].join('\n');
}

function renderGroupHelp(group: string): string {
  const members = commands.filter((command) => command.name.startsWith(`${group} `));
  const width = Math.max(...members.map((command) => command.name.length));
  return [
    `usage: kvreuse ${group} <${members.map((c) => c.name.slice(group.length + 1)).join('|')}> [options]`,
    '',
    ...members.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
  ].join('\n');
}

/** Finds the command the leading words name; the rest of argv are its arguments. */
function findCommand(argv: readonly string[]): { command: Command; rest: readonly string[] } | { help: string } {
  const [first, second] = argv;
  if (first === undefined || first === '--help' || first === '-h') return { help: renderTopHelp() };
  if (first === '--version') return { help: `${cliVersion}\n` };
  // Two words before one: `bench link` is a command of its own beside `bench`.
  const pair = second === undefined ? undefined : byName.get(`${first} ${second}`);
  if (pair !== undefined) return { command: pair, rest: argv.slice(2) };
  const single = byName.get(first);
  if (single !== undefined) return { command: single, rest: argv.slice(1) };
  if (!topLevel.includes(first)) throw new UnknownCommandError(first, topLevel);
  const subcommands = commands
    .filter((command) => command.name.startsWith(`${first} `))
    .map((command) => command.name.slice(first.length + 1));
  if (second === undefined || second === '--help' || second === '-h') return { help: renderGroupHelp(first) };
  const command = byName.get(`${first} ${second}`);
  if (command === undefined) throw new UnknownCommandError(second, subcommands, first);
  return { command, rest: argv.slice(2) };
}

/** Registry errors that a setting or a file it names causes: the cluster secret and etcd's certificates, user and password. */
const settingsFileErrors = [
  ClusterSecretError,
  DiscoveryCredentialsFileError,
  DiscoverySettingsError,
  DiscoveryTlsError,
  DiscoveryAuthenticationError,
];

/** The exit status of an error: 2 for what the user must fix (arguments, settings, files), 1 otherwise. */
export function exitCodeOf(error: unknown): 1 | 2 {
  if (error instanceof CliError) return error.exitCode;
  // What failed could not keep its undoing's failure: the binary ends as it would have without one.
  if (error instanceof CleanupFailedError) return exitCodeOf(error.thrown);
  if (isConfigError(error) || error instanceof ProfileAdmissionError) return 2;
  if (settingsFileErrors.some((type) => error instanceof type)) return 2;
  return 1;
}

/**
 * Runs the kvreuse binary on `argv` (without the node and script paths) and returns its exit status.
 * An error goes to stderr once (`kvreuse: … [CODE]` and the rest of its message), with its stack only under `--verbose`.
 */
export async function runCli(argv: readonly string[], context: CliContext): Promise<number> {
  const verbose = argv.includes('--verbose');
  try {
    const found = findCommand(argv);
    if ('help' in found) {
      context.stdout(found.help);
      return 0;
    }
    const { command, rest } = found;
    const args = splitArgs(command.name, rest, command.options);
    if (args.options.has('help')) {
      context.stdout(renderCommandHelp(command));
      return 0;
    }
    await command.run(args, context);
    return 0;
  } catch (error) {
    context.stderr(errorText(error, verbose));
    return exitCodeOf(error);
  }
}
