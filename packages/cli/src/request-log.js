// The demo's request log: one pino JSON line per request it served, with its receipt, on stderr or
// appended to the file `--log` names, so that stdout (and its `--json` summary) stays clean.
import { closeSync, openSync } from 'node:fs';
import { resolve } from 'node:path';
import { pino } from 'pino';
import { InputFileError } from './errors.js';
export const logOption = { name: 'log', value: '<file>', description: 'append the request log (one JSON line per request, with its receipt) to this file instead of stderr' };
export function requestRecord(request, decision, receipt) {
    if (receipt === null) {
        return { request, action: decision.action, reason: decision.reason, pull: null, recomputed: { blocks: null, reasons: [decision.detail] } };
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
/** The request log `--log` asks for (a file it appends to), else on the command's stderr. */
export function openRequestLog(args, context) {
    const [file] = args.options.get('log') ?? [];
    let fd;
    if (file !== undefined) {
        const path = resolve(context.cwd, file);
        try {
            fd = openSync(path, 'a');
        }
        catch (error) {
            throw new InputFileError(path, `cannot be opened to append the request log (${error.message})`, { cause: error });
        }
    }
    const logger = pino({ name: 'kvreuse-demo' }, fd === undefined ? { write: (line) => context.stderr(line) } : pino.destination({ fd, sync: true }));
    return {
        served: (request, decision, receipt) => logger.info(requestRecord(request, decision, receipt), 'request served'),
        close: () => {
            if (fd !== undefined)
                closeSync(fd);
        },
    };
}
