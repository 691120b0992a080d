import { verifyModes } from '@kvreuse/endpoint';
import { blockHashFromHex, blockHashToHex } from '@kvreuse/registry';
import { linkClasses, sourceTiers } from '@kvreuse/router';
import { DemoMessageError } from '../errors.js';
import { terminalStates } from './quarantine-report.js';
export function hintLine(hint) {
    const { workerId, incarnation, epoch, blockTokens, linkClass, tier } = hint;
    return { workerId, incarnation, epoch, start: hint.blocks.start, hashes: Array.from(hint.hashes, blockHashToHex), blockTokens, linkClass, tier };
}
export function hintOf(line) {
    const hashes = BigUint64Array.from(line.hashes, (hex) => blockHashFromHex(hex));
    const { workerId, incarnation, epoch, blockTokens, linkClass, tier } = line;
    return { workerId, incarnation, epoch, blocks: { start: line.start, count: hashes.length }, hashes, blockTokens, linkClass, tier };
}
/** What a rank says when something it was doing failed. */
export function failure(error) {
    return { type: 'failed', message: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
}
/** A drain's summary; `report.pins` is the endpoint's list of the pins waited for (`close()`'s report has it). */
export function drainSummary(report, agentDestroyed) {
    const { released = 0, lapsed = 0, outstanding = 0 } = report.readers ?? {};
    const held = (report.pins ?? []).map((pin) => ({ reader: pin.readerAgent, blocks: pin.blocks, ended: pin.ended ?? 'held' }));
    return {
        banksReturned: report.banksReturned.length,
        banksRetained: report.banksRetained.length,
        quarantined: report.quarantined.length,
        agentDestroyed,
        pins: { waitedFor: released + lapsed + outstanding, released, lapsed, outstanding, held },
        steps: report.steps.map((step) => `${step.step}: ${step.outcome}`),
    };
}
const count = (value) => (Number.isSafeInteger(value) && value >= 0 ? undefined : 'must be a whole number ≥ 0');
const number = (value) => (typeof value === 'number' && Number.isFinite(value) ? undefined : 'must be a finite number');
const text = (value) => (typeof value === 'string' ? undefined : 'must be a string');
const flag = (value) => (typeof value === 'boolean' ? undefined : 'must be a boolean');
const hex = (value) => (typeof value === 'string' && /^[0-9a-f]{16}$/.test(value) ? undefined : 'must be a 16-digit hex block hash');
const list = (item) => (value) => {
    if (!Array.isArray(value))
        return 'must be an array';
    for (const [index, element] of value.entries()) {
        const why = item(element);
        if (why !== undefined)
            return `[${index}]${/^[.[]/.test(why) ? '' : ' '}${why}`;
    }
    return undefined;
};
const object = (fields, optional = []) => (value) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value))
        return 'must be an object';
    for (const [name, check] of Object.entries(fields)) {
        const field = value[name];
        if (field === undefined && optional.includes(name))
            continue;
        const why = check(field);
        if (why !== undefined)
            return `.${name}${/^[.[]/.test(why) ? '' : ' '}${why}`;
    }
    return undefined;
};
const oneOf = (values) => (value) => values.includes(value) ? undefined : `must be one of ${values.join(', ')}`;
const optional = (check) => (value) => value === undefined ? undefined : check(value);
const role = (value) => (value === 'decode' || value === 'prefill' ? undefined : "must be 'decode' or 'prefill'");
const said = { role, tpRank: count };
const messageFields = {
    published: { ...said, agentName: text, epoch: count, metricsUrl: optional(text) },
    ready: said,
    allocated: { ...said, slots: list(count) },
    'handed-off': { ...said, blocks: count, bytes: count, ms: number },
    retained: { ...said, blocks: count, verified: count, appended: count },
    armed: said,
    holding: { ...said, sources: list(text) },
    'stopping-after-post': { ...said, operations: count },
    'waiting-for-readers': said,
    pulled: {
        ...said,
        pull: object({
            requested: count,
            blocks: count,
            bytes: count,
            verified: flag,
            verify: oneOf(verifyModes),
            checkedBlocks: count,
            ms: number,
            gbps: number,
            recomputed: object({ blocks: count, reasons: list(text) }),
            saving: object({ predictedMs: number, measuredMs: number }),
            calibration: object({ linkClass: oneOf(linkClasses), tier: oneOf(sourceTiers), blocks: count, bytes: count, transferMs: number }),
        }, ['saving', 'calibration']),
    },
    drained: {
        ...said,
        drain: object({
            banksReturned: count,
            banksRetained: count,
            quarantined: count,
            agentDestroyed: flag,
            pins: object({ waitedFor: count, released: count, lapsed: count, outstanding: count, held: list(object({ reader: text, blocks: count, ended: text })) }),
            steps: list(text),
        }),
    },
    failed: { ...said, message: text },
    quarantined: { ...said, operation: text, banks: count, banksRetained: count },
    quiesced: { ...said, operation: text, terminal: oneOf(terminalStates), code: optional(text), bytesDone: count, banksRetained: count },
};
const commandFields = {
    allocate: { count },
    'hand-off': { hashes: list(hex), destinationSlots: list(count) },
    retain: { slots: list(count), hashes: list(hex), append: list(hex), publishInventory: flag },
    pull: {
        hint: object({
            workerId: text,
            incarnation: text,
            epoch: count,
            start: count,
            hashes: list(hex),
            blockTokens: count,
            linkClass: oneOf(linkClasses),
            tier: oneOf(sourceTiers),
        }),
        prediction: optional(object({ predictedMs: number, prefillTokenUs: number, lookupBudgetMs: number })),
        holdPins: optional(flag),
        stopAfterPost: optional(flag),
    },
    'release-pins': {},
    'crash-on-pin': {},
};
function validated(value, fields, what) {
    const why = object(fields)(value);
    if (why !== undefined)
        throw new DemoMessageError(`${what} "${String(value['type'])}"`, why);
    return value;
}
export function encodeRankMessage(message) {
    return `${JSON.stringify(message)}\n`;
}
export function encodeRankCommand(command) {
    return `${JSON.stringify(command)}\n`;
}
/**
 * A line a rank process wrote: its message, or undefined for a line that is not one (a log line of the
 * process). A line of a message type with a bad field throws DemoMessageError.
 */
export function parseRankMessage(line) {
    let value;
    try {
        value = JSON.parse(line);
    }
    catch {
        return undefined;
    }
    if (typeof value !== 'object' || value === null || !Object.hasOwn(messageFields, value.type))
        return undefined;
    const record = value;
    return validated(record, messageFields[record['type']], 'rank message');
}
/** A command line the parent wrote; DemoMessageError for anything else. */
export function parseRankCommand(line) {
    let value;
    try {
        value = JSON.parse(line);
    }
    catch {
        throw new DemoMessageError('command line', `is not JSON: ${JSON.stringify(line.slice(0, 80))}`);
    }
    const type = value?.type;
    if (typeof value !== 'object' || value === null || !Object.hasOwn(commandFields, type)) {
        throw new DemoMessageError('command type', `must be one of ${Object.keys(commandFields).join(', ')}; got ${JSON.stringify(type)}`);
    }
    return validated(value, commandFields[type], 'command');
}
