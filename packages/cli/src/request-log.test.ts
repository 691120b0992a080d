import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { splitArgs } from './args.js';
import type { DemoDecision } from './demo/demo-summary.js';
import type { PullReport } from './demo/rank-messages.js';
import { logFormatOption, logOption, openRequestLog, requestRecord, requestText } from './request-log.js';

const logOptions = [logOption, logFormatOption];

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-cli-request-log-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const pullDecision: DemoDecision = {
  request: 'turn 2',
  action: 'pull',
  reason: 'worth-it',
  detail: 'pull 42 blocks',
  blocks: 42,
  savingMs: 134.4,
  costMs: 6.2,
  rejected: [],
};
const refused: DemoDecision = {
  request: 'short request',
  action: 'recompute',
  reason: 'too-short',
  detail: 'the longest retained prefix adds 2 blocks',
  blocks: 2,
  savingMs: 0,
  costMs: 0,
  rejected: [],
};
const receipt: PullReport = {
  memory: 'dram',
  requested: 42,
  blocks: 40,
  bytes: 40 * 7_340_032,
  verified: true,
  verify: 'sampled',
  checkedBlocks: 6,
  ms: 52.5,
  gbitPerS: 44.7,
  recomputed: { blocks: 2, reasons: ['from block 40: checksum mismatch'] },
};

function context(cwd = dir) {
  const out = { stdout: '', stderr: '' };
  return {
    out,
    context: {
      stdout: (text: string) => (out.stdout += text),
      stderr: (text: string) => (out.stderr += text),
      env: {},
      cwd,
    },
  };
}

describe('requestRecord', () => {
  it('a pulled request: the receipt, and what was recomputed and why', () => {
    expect(requestRecord('turn 2', pullDecision, receipt)).toEqual({
      request: 'turn 2',
      action: 'pull',
      reason: 'worth-it',
      pull: {
        blocks: 40,
        bytes: 293_601_280,
        verified: true,
        verify: 'sampled',
        checkedBlocks: 6,
        ms: 52.5,
        gbitPerS: 44.7,
      },
      recomputed: { blocks: 2, reasons: ['from block 40: checksum mismatch'] },
    });
  });

  it("a request the router recomputes: no pull, the whole request recomputed for the router's reason", () => {
    expect(requestRecord('short request', refused, null)).toEqual({
      request: 'short request',
      action: 'recompute',
      reason: 'too-short',
      pull: null,
      recomputed: { blocks: null, reasons: ['the longest retained prefix adds 2 blocks'] },
    });
  });
});

describe('requestText', () => {
  it('a pulled request: what was pulled and verified, how fast, and what was recomputed and why', () => {
    expect(requestText(requestRecord('turn 2', pullDecision, receipt))).toBe(
      'request served: turn 2: pull (worth-it), 40 blocks pulled, 293,601,280 bytes, verified (sampled, 6 blocks checked), 52.5 ms, 44.70 Gbit/s; 2 blocks recomputed: from block 40: checksum mismatch',
    );
  });

  it('a request recomputed whole: why', () => {
    expect(requestText(requestRecord('short request', refused, null))).toBe(
      'request served: short request: recompute (too-short), recomputed: the longest retained prefix adds 2 blocks',
    );
  });
});

describe('openRequestLog', () => {
  it('without --log: one readable line per request on stderr, nothing on stdout', () => {
    const { out, context: ctx } = context();
    const log = openRequestLog(splitArgs('demo', [], logOptions), ctx);
    log.served('turn 2', pullDecision, receipt);
    log.served('short request', refused, null);
    log.close();
    expect(out.stdout).toBe('');
    expect(out.stderr).toBe(
      [requestRecord('turn 2', pullDecision, receipt), requestRecord('short request', refused, null)]
        .map((record) => `${requestText(record)}\n`)
        .join(''),
    );
  });

  it('--log-format json: one pino JSON line per request on stderr, nothing on stdout', () => {
    const { out, context: ctx } = context();
    const log = openRequestLog(splitArgs('demo', ['--log-format', 'json'], logOptions), ctx);
    log.served('turn 2', pullDecision, receipt);
    log.served('short request', refused, null);
    log.close();
    expect(out.stdout).toBe('');
    const lines = out.stderr.split('\n');
    expect(lines.at(-1)).toBe('');
    expect(lines.slice(0, -1).map((line) => JSON.parse(line) as unknown)).toEqual([
      expect.objectContaining({
        level: 30,
        name: 'kvreuse-demo',
        msg: 'request served',
        time: expect.any(Number),
        pid: process.pid,
        ...requestRecord('turn 2', pullDecision, receipt),
      }),
      expect.objectContaining({ level: 30, msg: 'request served', ...requestRecord('short request', refused, null) }),
    ]);
  });

  it('--log <file>: appends the lines to the file (relative to the working directory), stderr stays empty', () => {
    writeFileSync(join(dir, 'requests.log'), 'an earlier line\n');
    const { out, context: ctx } = context();
    const log = openRequestLog(splitArgs('demo', ['--log', 'requests.log', '--log-format=json'], logOptions), ctx);
    log.served('short request', refused, null);
    log.close();
    expect(out).toEqual({ stdout: '', stderr: '' });
    const [earlier, line, end] = readFileSync(join(dir, 'requests.log'), 'utf8').split('\n');
    expect(earlier).toBe('an earlier line');
    expect(JSON.parse(line!)).toEqual(
      expect.objectContaining({ msg: 'request served', request: 'short request', pull: null }),
    );
    expect(end).toBe('');
  });

  it('--log <file> it created and never wrote to (a run that failed first): closing removes it; one that was there stays', () => {
    const { context: ctx } = context();
    openRequestLog(splitArgs('demo', ['--log', 'unused.log'], logOptions), ctx).close();
    expect(existsSync(join(dir, 'unused.log'))).toBe(false);
    writeFileSync(join(dir, 'earlier.log'), '');
    openRequestLog(splitArgs('demo', ['--log', 'earlier.log'], logOptions), ctx).close();
    expect(readFileSync(join(dir, 'earlier.log'), 'utf8')).toBe('');
  });

  it('--log in a directory that does not exist: INPUT_FILE naming the file', () => {
    const { context: ctx } = context();
    const path = join(dir, 'missing', 'requests.log');
    expect(() => openRequestLog(splitArgs('demo', ['--log', path], logOptions), ctx)).toThrow(
      expect.objectContaining({
        code: 'INPUT_FILE',
        message: expect.stringMatching(new RegExp(`^${path}: cannot be opened to append the request log \\(ENOENT`)),
      }),
    );
  });

  it('a --log-format it does not know: a usage error naming the formats', () => {
    const { context: ctx } = context();
    expect(() => openRequestLog(splitArgs('demo', ['--log-format', 'xml'], logOptions), ctx)).toThrow(
      'demo: --log-format must be one of text, json; got "xml" (see kvreuse demo --help)',
    );
  });
});
