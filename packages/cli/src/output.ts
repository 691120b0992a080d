// What a command prints when its output is data: `-o table` (the default, for people), `-o json` or
// `-o yaml` (one document on stdout and nothing else); `--json` is `-o json`. A command that reports as it
// goes (`sidecar`, `watch`) takes `-o table` (a line for people per report) or `-o json` (a JSON line each).
import { stringify } from 'yaml';
import type { CommandArgs, OptionSpec } from './args.js';
import { UsageError } from './errors.js';

export const outputOption: OptionSpec = {
  name: 'output',
  short: 'o',
  value: '<table|json|yaml>',
  description: 'table (the default) for people; json or yaml print one document on stdout and nothing else',
};

export const jsonOption: OptionSpec = { name: 'json', description: 'the same as -o json' };

/** The options of a command whose output is data. */
export const dataOptions: readonly OptionSpec[] = [outputOption, jsonOption];

const formats = ['table', 'json', 'yaml'] as const;
export type OutputFormat = (typeof formats)[number];
/** A format that prints one document. */
export type DocumentFormat = Exclude<OutputFormat, 'table'>;

/** The document format `-o` or `--json` asks for; undefined for the table. */
export function documentFormatOf(command: string, args: CommandArgs): DocumentFormat | undefined {
  const [output] = args.options.get('output') ?? [];
  const json = args.options.has('json');
  if (output !== undefined && !(formats as readonly string[]).includes(output))
    throw new UsageError(command, `-o must be one of ${formats.join(', ')}; got ${JSON.stringify(output)}`);
  if (json && output !== undefined && output !== 'json')
    throw new UsageError(command, `--json and -o ${output} ask for different outputs; give one`);
  const format = json ? 'json' : ((output ?? 'table') as OutputFormat);
  return format === 'table' ? undefined : format;
}

/** `value` as one document in `format`, ending with a newline. */
export function renderDocument(format: DocumentFormat, value: unknown): string {
  return format === 'json' ? `${JSON.stringify(value, null, 2)}\n` : stringify(value, { lineWidth: 0 });
}

/** The options of a command that prints one line per report as it goes. */
export const lineOptions: readonly OptionSpec[] = [
  {
    ...outputOption,
    value: '<table|json>',
    description: 'table (the default): one line per report for people; json: one JSON object per line',
  },
  jsonOption,
];

/** Whether `-o json` or `--json` asks a command that reports line by line for JSON lines. */
export function jsonLinesOf(command: string, args: CommandArgs): boolean {
  const format = documentFormatOf(command, args);
  if (format === 'yaml')
    throw new UsageError(
      command,
      '-o yaml prints one document; this command reports line by line: -o table or -o json',
    );
  return format === 'json';
}
