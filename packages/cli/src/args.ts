import { kvreuseSettings } from './settings/all-settings.js';
import { UsageError } from './errors.js';

/** An option of a command itself (not a setting): `--json`, `--config <file>`, `--worker <file>` (repeatable). */
export interface OptionSpec {
  readonly name: string;
  /** Takes a value (`--config <file>`); otherwise a bare switch. */
  readonly value?: string;
  readonly repeatable?: boolean;
  /** A one-letter alias: `o` for `-o json`. */
  readonly short?: string;
  readonly description: string;
}

export interface CommandArgs {
  /** Switches given, and the values of options that take one (every value of a repeatable option). */
  readonly options: ReadonlyMap<string, readonly string[]>;
  readonly positionals: readonly string[];
  /** Everything else, in order: setting flags and their values, for `resolve({ argv })`. */
  readonly settingsArgv: readonly string[];
}

/** The options every command takes. */
export const commonOptions: readonly OptionSpec[] = [
  { name: 'help', short: 'h', description: 'show this help' },
  { name: 'verbose', description: 'show the stack of an error' },
];

const booleanFlags = new Set(
  kvreuseSettings
    .describe()
    .flatMap((group) => group.settings.filter((s) => s.jsonSchema['type'] === 'boolean').map((s) => s.flag)),
);

/**
 * Splits a command's arguments into its own options, its positionals and the setting flags, read the
 * way `@kvreuse/config` reads argv: a setting flag other than a boolean takes the next argument as its
 * value unless it is written `--flag=value`; so does a flag no setting has (config then names it).
 */
export function splitArgs(command: string, argv: readonly string[], specs: readonly OptionSpec[]): CommandArgs {
  const all = [...commonOptions, ...specs];
  const own = new Map(all.map((spec) => [`--${spec.name}`, spec]));
  for (const spec of all) if (spec.short !== undefined) own.set(`-${spec.short}`, spec);
  const options = new Map<string, string[]>();
  const positionals: string[] = [];
  const settingsArgv: string[] = [];
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index]!;
    if (!argument.startsWith('--') && !own.has(argument.split('=')[0]!)) {
      positionals.push(argument);
      continue;
    }
    const equals = argument.indexOf('=');
    const written = equals === -1 ? argument : argument.slice(0, equals);
    const inline = equals === -1 ? undefined : argument.slice(equals + 1);
    const next = argv[index + 1];
    const spec = own.get(written);
    if (spec !== undefined) {
      const values = options.get(spec.name) ?? [];
      if (values.length > 0 && spec.repeatable !== true)
        throw new UsageError(command, `${written} is given more than once`);
      if (spec.value === undefined) {
        if (inline !== undefined) throw new UsageError(command, `${written} takes no value`);
      } else if (inline !== undefined) {
        values.push(inline);
      } else if (next !== undefined && !next.startsWith('--')) {
        values.push(next);
        index++;
      } else {
        throw new UsageError(command, `${written} needs a value: ${written} ${spec.value}`);
      }
      // An empty path would name the working directory, an empty address every interface: never what was meant.
      if (values.at(-1) === '')
        throw new UsageError(command, `${written} needs a value, not an empty one: ${written} ${spec.value}`);
      options.set(spec.name, values);
      continue;
    }
    settingsArgv.push(argument);
    const takesNext =
      inline === undefined &&
      !booleanFlags.has(written) &&
      !written.startsWith('--no-') &&
      next !== undefined &&
      !next.startsWith('--');
    if (takesNext) {
      settingsArgv.push(next);
      index++;
    }
  }
  return { options, positionals, settingsArgv };
}

/** Renders a command's own options for its help. */
export function renderOptions(specs: readonly OptionSpec[]): string {
  return [...specs, ...commonOptions]
    .map(
      (spec) =>
        `  ${spec.short === undefined ? '' : `-${spec.short}, `}--${spec.name}${spec.value === undefined ? '' : ` ${spec.value}`}${spec.repeatable === true ? ' (repeatable)' : ''}\n      ${spec.description}`,
    )
    .join('\n');
}
