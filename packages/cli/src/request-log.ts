// The demo's request log: one pino JSON line per request it served, with its receipt, on stderr or
// appended to the file `--log` names, so that stdout (and its `--json` summary) stays clean.
import { closeSync, openSync } from 'node:fs';
import { resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import type { CommandArgs, OptionSpec } from './args.js';
import type { CliContext } from './command.js';
import type { DemoDecision } from './demo/demo-summary.js';
import type { PullReport } from './demo/rank-messages.js';
import { InputFileError } from './errors.js';

export const logOption: OptionSpec = {
  name: 'log',
  value: '<file>',
  description: 'append the request log (one JSON line per request, with its receipt) to this file instead of stderr',
};

/** One request as the log records it: what the router decided, what was pulled, what was recomputed and why. */
export interface RequestRecord {
  readonly request: string;
  readonly action: DemoDecision['action'];
  readonly reason: string;
  /** The verified prefix committed from the sources; null when the router sent the request to recompute. */
  readonly pull: Pick<PullReport, 'blocks' | 'bytes' | 'verified' | 'verify' | 'checkedBlocks' | 'ms' | 'gbps'> | null;
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
  const { blocks, bytes, verified, verify, checkedBlocks, ms, gbps, recomputed } = receipt;
  return {
    request,
    action: decision.action,
    reason: decision.reason,
    pull: { blocks, bytes, verified, verify, checkedBlocks, ms, gbps },
    recomputed: { blocks: recomputed.blocks, reasons: recomputed.reasons },
  };
}

export interface RequestLog {
  served(request: string, decision: DemoDecision, receipt: PullReport | null): void;
  close(): void;
}

/** The request log `--log` asks for (a file it appends to), else on the command's stderr. */
export function openRequestLog(args: CommandArgs, context: CliContext): RequestLog {
  const [file] = args.options.get('log') ?? [];
  let fd: number | undefined;
  if (file !== undefined) {
    const path = resolve(context.cwd, file);
    try {
      fd = openSync(path, 'a');
    } catch (error) {
      throw new InputFileError(path, `cannot be opened to append the request log (${(error as Error).message})`, {
        cause: error,
      });
    }
  }
  const logger: Logger = pino(
    { name: 'kvreuse-demo' },
    fd === undefined ? { write: (line: string) => context.stderr(line) } : pino.destination({ fd, sync: true }),
  );
  return {
    served: (request, decision, receipt) => logger.info(requestRecord(request, decision, receipt), 'request served'),
    close: () => {
      if (fd !== undefined) closeSync(fd);
    },
  };
}
