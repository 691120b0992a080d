import type { SettingsEnv } from '@kvreuse/config';
import { type CommandArgs, type OptionSpec, renderOptions } from './args.js';
import type { WhenInterrupted } from './interrupts.js';

/** What a command may touch of its process: given by the binary, so that commands read no globals. */
export interface CliContext {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  /** The environment (only `KVREUSE_*` variables are read as settings). */
  readonly env: SettingsEnv;
  readonly cwd: string;
  /** Where a command registers what to undo if the process is interrupted (the binary's: SIGINT, SIGTERM); without it, an interruption undoes nothing. */
  readonly whenInterrupted?: WhenInterrupted;
  /** Resolves with the process's next SIGINT or SIGTERM, which then interrupts nothing (the binary's); without it, a command cannot wait for one. */
  readonly nextSignal?: () => Promise<NodeJS.Signals>;
}

/** One command the binary runs: `config show`, `inspect`, … */
export interface Command {
  readonly name: string;
  readonly summary: string;
  /** After `kvreuse <name>`: `[options] [setting flags]`. */
  readonly usage: string;
  readonly options: readonly OptionSpec[];
  /** The rest of the help: what it prints, then the settings it reads (generated from the catalog). */
  help(): string;
  /** Runs it; throws a typed error for anything that goes wrong. */
  run(args: CommandArgs, context: CliContext): Promise<void>;
}

/** A command's full help text. */
export function renderCommandHelp(command: Command): string {
  return (
    `usage: kvreuse ${command.name} ${command.usage}\n\n${command.summary}\n\noptions:\n${renderOptions(command.options)}\n\n${command.help()}`.trimEnd() +
    '\n'
  );
}
