// The demo's request log: one line per request it served, with its receipt, on stderr or appended to
// the file `--log` names, so that stdout (and its `-o json` summary) stays clean. A readable line by
// default; one pino JSON line each with `--log-format json`.
import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import type { CommandArgs, OptionSpec } from './args.js';
import type { CliContext } from './command.js';
import type { DemoDecision } from './demo/demo-summary.js';
import type { PullReport } from './demo/rank-messages.js';
import { InputFileError, UsageError } from './errors.js';

export const logOption: OptionSpec = {
  name: 'log',
  value: '<file>',
  description: 'append the request log (one line per request, with its receipt) to this file instead of stderr',
};

export const logFormatOption: OptionSpec = {
  name: 'log-format',
  value: '<text|json>',
  description: 'text (the default): one readable line per request; json: one pino JSON line per request',
};

const logFormats = ['text', 'json'] as const;
type LogFormat = (typeof logFormats)[number];

function logFormatOf(args: CommandArgs): LogFormat {
  const [format = 'text'] = args.options.get('log-format') ?? [];
  if (!(logFormats as readonly string[]).includes(format))
    throw new UsageError('demo', `--log-format must be one of ${logFormats.join(', ')}; got ${JSON.stringify(format)}`);
  return format as LogFormat;
}

/** One request as the log records it: what the router decided, what was pulled, what was recomputed and why. */
export interface RequestRecord {
  readonly request: string;
  readonly action: DemoDecision['action'];
  readonly reason: string;
  /** The verified prefix committed from the sources; null when the router sent the request to recompute. */
  readonly pull: Pick<
    PullReport,
    'blocks' | 'bytes' | 'verified' | 'verify' | 'checkedBlocks' | 'ms' | 'gbitPerS'
  > | null;
  /** Blocks computed instead of pulled (null: the whole request), and why. */
  readonly recomputed: { readonly blocks: number | null; readonly reasons: readonly string[] };
}

export function requestRecord(request: string, decision: DemoDecision, receipt: PullReport | null): RequestRecord {
  if (receipt === null) {
    return {
      request,
      action: decision.action,
      reason: decision.reason,
      pull: null,
      recomputed: { blocks: null, reasons: [decision.detail] },
    };
  }
  const { blocks, bytes, verified, verify, checkedBlocks, ms, gbitPerS, recomputed } = receipt;
  return {
    request,
    action: decision.action,
    reason: decision.reason,
    pull: { blocks, bytes, verified, verify, checkedBlocks, ms, gbitPerS },
    recomputed: { blocks: recomputed.blocks, reasons: recomputed.reasons },
  };
}

/** A record as one readable line: `turn 2: pull (worth-it), 42 blocks pulled, …`. */
export function requestText(record: RequestRecord): string {
  const { pull, recomputed } = record;
  const head = `request served: ${record.request}: ${record.action} (${record.reason})`;
  const why = recomputed.reasons.join('; ');
  if (pull === null || pull.blocks === 0) return `${head}, recomputed: ${why}`;
  const pulled =
    `${pull.blocks} blocks pulled, ${pull.bytes.toLocaleString('en-US')} bytes, ` +
    `${pull.verified ? 'verified' : 'NOT verified'} (${pull.verify}, ${pull.checkedBlocks} blocks checked), ` +
    `${pull.ms.toFixed(1)} ms, ${pull.gbitPerS.toFixed(2)} Gbit/s`;
  return `${head}, ${pulled}${recomputed.blocks === 0 ? '' : `; ${recomputed.blocks} blocks recomputed: ${why}`}`;
}

export interface RequestLog {
  served(request: string, decision: DemoDecision, receipt: PullReport | null): void;
  close(): void;
}

/** `path` opened to append; `created` when this opened it new (`wx` first, so another's file is never taken for ours). */
function appendTo(path: string): { path: string; fd: number; created: boolean } {
  try {
    try {
      return { path, fd: openSync(path, 'wx'), created: true };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      return { path, fd: openSync(path, 'a'), created: false };
    }
  } catch (error) {
    throw new InputFileError(path, `cannot be opened to append the request log (${(error as Error).message})`, {
      cause: error,
    });
  }
}

/**
 * The request log `--log` asks for (a file it appends to), else on the command's stderr, in the `--log-format`.
 * Closed with nothing written (the run failed first), a file it created is removed again.
 */
export function openRequestLog(args: CommandArgs, context: CliContext): RequestLog {
  const format = logFormatOf(args);
  const [file] = args.options.get('log') ?? [];
  const opened = file === undefined ? undefined : appendTo(resolve(context.cwd, file));
  let written = false;
  const write =
    opened === undefined
      ? (line: string) => context.stderr(line)
      : (line: string) => {
          written = true;
          writeSync(opened.fd, line);
        };
  const logger: Logger | undefined = format === 'json' ? pino({ name: 'kvreuse-demo' }, { write }) : undefined;
  return {
    served: (request, decision, receipt) => {
      const record = requestRecord(request, decision, receipt);
      if (logger === undefined) write(`${requestText(record)}\n`);
      else logger.info(record, 'request served');
    },
    close: () => {
      if (opened === undefined) return;
      closeSync(opened.fd);
      if (opened.created && !written) rmSync(opened.path, { force: true });
    },
  };
}
