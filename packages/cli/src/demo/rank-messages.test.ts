import { describe, expect, it } from 'vitest';
import { DemoMessageError } from '../errors.js';
import {
  encodeRankCommand,
  encodeRankMessage,
  hintLine,
  hintOf,
  parseRankCommand,
  parseRankMessage,
  type RankCommand,
  type RankMessage,
} from './rank-messages.js';

const hash = '00000000deadbeef';

describe('the demo messages between the parent and its ranks', () => {
  it.each<RankCommand>([
    { type: 'allocate', count: 40 },
    { type: 'hand-off', hashes: [hash], destinationSlots: [7] },
    { type: 'retain', slots: [7], hashes: [hash], append: [hash], publishInventory: true },
    {
      type: 'pull',
      hint: {
        workerId: 'd',
        incarnation: 'i',
        epoch: 2,
        start: 0,
        hashes: [hash],
        blockTokens: 64,
        linkClass: 'same-host',
        tier: 'host',
      },
    },
    {
      type: 'pull',
      hint: {
        workerId: 'd',
        incarnation: 'i',
        epoch: 2,
        start: 3,
        hashes: [hash],
        blockTokens: 16,
        linkClass: 'network',
        tier: 'gpu',
      },
      prediction: { predictedMs: 1, prefillTokenUs: 50, lookupBudgetMs: 2 },
    },
    {
      type: 'pull',
      hint: {
        workerId: 'd',
        incarnation: 'i',
        epoch: 2,
        start: 0,
        hashes: [hash],
        blockTokens: 64,
        linkClass: 'same-host',
        tier: 'host',
      },
      holdPins: true,
    },
    {
      type: 'pull',
      hint: {
        workerId: 'd',
        incarnation: 'i',
        epoch: 2,
        start: 0,
        hashes: [hash],
        blockTokens: 64,
        linkClass: 'same-host',
        tier: 'host',
      },
      stopAfterPost: true,
    },
    { type: 'release-pins' },
    { type: 'crash-on-pin' },
  ])('a %j command goes through its codec unchanged', (command) => {
    expect(parseRankCommand(encodeRankCommand(command).trimEnd())).toEqual(command);
  });

  it.each<[string, string]>([
    ['{"type":"allocate","count":-1}', 'demo message: command "allocate" .count must be a whole number ≥ 0'],
    [
      '{"type":"retain","slots":[1],"hashes":["xyz"],"append":[],"publishInventory":true}',
      'demo message: command "retain" .hashes[0] must be a 16-digit hex block hash',
    ],
    [
      '{"type":"pull","hint":{"workerId":"d","incarnation":"i","start":0,"hashes":[],"blockTokens":64,"linkClass":"same-host","tier":"host"}}',
      'demo message: command "pull" .hint.epoch must be a whole number ≥ 0',
    ],
    [
      '{"type":"pull","hint":{"workerId":"d","incarnation":"i","epoch":1,"start":0,"hashes":[],"blockTokens":64,"linkClass":"lan","tier":"host"}}',
      'demo message: command "pull" .hint.linkClass must be one of same-host, network',
    ],
    [
      '{"type":"evict"}',
      'demo message: command type must be one of allocate, hand-off, retain, pull, release-pins, crash-on-pin; got "evict"',
    ],
    [
      '{"type":"pull","hint":{"workerId":"d","incarnation":"i","epoch":1,"start":0,"hashes":[],"blockTokens":64,"linkClass":"same-host","tier":"host"},"stopAfterPost":1}',
      'demo message: command "pull" .stopAfterPost must be a boolean',
    ],
    ['not json', 'demo message: command line is not JSON: "not json"'],
  ])('refuses the command %s, naming the field', (line, message) => {
    expect(() => parseRankCommand(line)).toThrow(DemoMessageError);
    expect(() => parseRankCommand(line)).toThrow(message);
  });

  it("carries the router's pull hint with its hashes as hex, and back", () => {
    const hint = {
      workerId: 'd',
      incarnation: 'i',
      epoch: 2,
      blocks: { start: 1, count: 2 },
      hashes: BigUint64Array.of(0xdeadbeefn, 0xffff_ffff_ffff_ffffn),
      blockTokens: 64,
      linkClass: 'same-host',
      tier: 'host',
    } as const;
    const line = hintLine(hint);
    expect(line.hashes).toEqual([hash, 'ffffffffffffffff']);
    expect(hintOf(line)).toEqual(hint);
  });

  it('reads a rank message back, and takes a line that is no message for a log line', () => {
    const message: RankMessage = {
      type: 'handed-off',
      role: 'prefill',
      tpRank: 0,
      blocks: 40,
      bytes: 293_601_280,
      ms: 63.7,
    };
    expect(parseRankMessage(encodeRankMessage(message))).toEqual(message);
    expect(parseRankMessage('[UCX] warning: something')).toBeUndefined();
    expect(parseRankMessage('{"type":"log"}')).toBeUndefined();
  });

  it.each<RankMessage>([
    { type: 'published', role: 'decode', tpRank: 1, agentName: 'decode-0-tp1', epoch: 3 },
    {
      type: 'published',
      role: 'decode',
      tpRank: 1,
      agentName: 'decode-0-tp1',
      epoch: 3,
      metricsUrl: 'http://127.0.0.1:9401/metrics',
    },
    { type: 'holding', role: 'prefill', tpRank: 0, sources: ['decode-0/tp0'] },
    { type: 'waiting-for-readers', role: 'decode', tpRank: 0 },
    { type: 'stopping-after-post', role: 'prefill', tpRank: 0, operations: 2 },
    { type: 'quarantined', role: 'prefill', tpRank: 0, operation: 'prefill-0-tp0#1', banks: 56, banksRetained: 56 },
    {
      type: 'quiesced',
      role: 'prefill',
      tpRank: 0,
      operation: 'prefill-0-tp0#1',
      terminal: 'cancelled',
      code: 'CANCELED',
      bytesDone: 0,
      banksRetained: 0,
    },
    {
      type: 'quiesced',
      role: 'prefill',
      tpRank: 0,
      operation: 'prefill-0-tp0#2',
      terminal: 'done',
      bytesDone: 154_140_672,
      banksRetained: 56,
    },
    {
      type: 'drained',
      role: 'decode',
      tpRank: 0,
      drain: {
        banksReturned: 56,
        banksRetained: 0,
        quarantined: 0,
        agentDestroyed: true,
        pins: {
          waitedFor: 1,
          released: 1,
          lapsed: 0,
          outstanding: 0,
          held: [{ reader: 'prefill-0-tp0', blocks: 42, ended: 'released' }],
        },
        steps: ['wait-for-readers: ok'],
      },
    },
    {
      type: 'pulled',
      role: 'prefill',
      tpRank: 0,
      pull: {
        memory: 'dram',
        requested: 42,
        blocks: 42,
        bytes: 308_281_344,
        verified: true,
        verify: 'sampled',
        checkedBlocks: 7,
        ms: 80,
        gbitPerS: 30.8,
        recomputed: { blocks: 0, reasons: [] },
      },
    },
    {
      type: 'pulled',
      role: 'prefill',
      tpRank: 0,
      pull: {
        memory: 'dram',
        requested: 42,
        blocks: 42,
        bytes: 308_281_344,
        verified: true,
        verify: 'full',
        checkedBlocks: 42,
        ms: 80,
        gbitPerS: 30.8,
        recomputed: { blocks: 0, reasons: [] },
        calibration: { linkClass: 'same-host', tier: 'host', blocks: 42, bytes: 308_281_344, transferMs: 80 },
      },
    },
  ])('a %j message goes through its codec unchanged', (message) => {
    expect(parseRankMessage(encodeRankMessage(message))).toEqual(message);
  });

  it('refuses a rank message of a known type with a bad field', () => {
    expect(() =>
      parseRankMessage('{"type":"retained","role":"decode","tpRank":1,"blocks":42,"verified":"all","appended":2}'),
    ).toThrow('demo message: rank message "retained" .verified must be a whole number ≥ 0');
    expect(() => parseRankMessage('{"type":"ready","role":"router","tpRank":0}')).toThrow(
      "demo message: rank message \"ready\" .role must be 'decode' or 'prefill'",
    );
    expect(() =>
      parseRankMessage('{"type":"published","role":"decode","tpRank":0,"agentName":"a","epoch":1,"metricsUrl":9400}'),
    ).toThrow('demo message: rank message "published" .metricsUrl must be a string');
    expect(() =>
      parseRankMessage(
        '{"type":"quiesced","role":"prefill","tpRank":0,"operation":"p#1","terminal":"quarantined","bytesDone":0,"banksRetained":0}',
      ),
    ).toThrow('demo message: rank message "quiesced" .terminal must be one of done, cancelled, failed');
    const pull = {
      memory: 'dram',
      requested: 1,
      blocks: 1,
      bytes: 1,
      verified: true,
      verify: 'most',
      checkedBlocks: 1,
      ms: 1,
      gbitPerS: 1,
      recomputed: { blocks: 0, reasons: [] },
    };
    expect(() => parseRankMessage(JSON.stringify({ type: 'pulled', role: 'prefill', tpRank: 0, pull }))).toThrow(
      'demo message: rank message "pulled" .pull.verify must be one of full, sampled, off',
    );
    expect(() =>
      parseRankMessage(
        JSON.stringify({
          type: 'pulled',
          role: 'prefill',
          tpRank: 0,
          pull: { ...pull, verify: 'full', memory: 'hbm' },
        }),
      ),
    ).toThrow('demo message: rank message "pulled" .pull.memory must be one of dram, vram');
  });
});
