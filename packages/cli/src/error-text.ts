import { isSettingsError, type SettingsError } from '@kvreuse/config';
import { messageOf } from '@kvreuse/errors';

/** Every problem a settings error lists, one per line (`router.x = 0 in file k.yaml:3: …`). */
export function problemLines(error: SettingsError): string[] {
  const [head = '', ...items] = error.message.split('\n');
  return items.length === 0 ? [head] : items.map((item) => item.replace(/^\s*- /, ''));
}

/** The frames of a stack: its lines after the message that it repeats. */
function frames(error: Error): string[] {
  return (error.stack ?? '').split('\n').filter((line) => /^\s+at /.test(line));
}

/**
 * What the binary prints for an error, each problem once: `kvreuse: <headline> [CODE]`, then the rest of
 * its message as it is (a settings error's list, a YAML code frame); with `verbose`, where it was thrown
 * and each cause with its own frames.
 */
export function errorText(error: unknown, verbose: boolean): string {
  const message = messageOf(error);
  const code = typeof error === 'object' && error !== null && 'code' in error ? ` [${String(error.code)}]` : '';
  const [headline = '', ...rest] = message.trimEnd().split('\n');
  // A settings error of one problem says it on one line; of more, one line each below the headline.
  const lines =
    isSettingsError(error) && rest.length === 1
      ? [`kvreuse: ${headline} ${problemLines(error)[0]}${code}`]
      : [`kvreuse: ${headline}${code}`, ...rest.map((line) => line.trimEnd())];
  if (verbose && error instanceof Error) {
    lines.push(...frames(error));
    for (let cause = error.cause; cause instanceof Error; cause = cause.cause)
      lines.push(`caused by: ${cause.name}: ${cause.message.split('\n')[0]}`, ...frames(cause));
  }
  return `${lines.join('\n')}\n`;
}
