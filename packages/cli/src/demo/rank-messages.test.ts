import { describe, expect, it } from 'vitest';
import { DemoMessageError } from '../errors.js';
import { encodeRankCommand, encodeRankMessage, parseRankCommand, parseRankMessage, type RankCommand, type RankMessage } from './rank-messages.js';

const hash = '00000000deadbeef';

describe('the demo messages between the parent and its ranks', () => {
  it.each<RankCommand>([
    { type: 'allocate', count: 40 },
    { type: 'hand-off', hashes: [hash], destinationSlots: [7] },
    { type: 'retain', slots: [7], hashes: [hash], append: [hash], publishInventory: true },
    { type: 'pull', hashes: [hash], source: { workerId: 'd', incarnation: 'i', epoch: 2 }, link: { linkClass: 'same-host', tier: 'host' }, holdAfterPins: false },
    { type: 'pull', hashes: [hash], source: { workerId: 'd', incarnation: 'i', epoch: 2 }, link: { linkClass: 'network', tier: 'gpu' }, prediction: { predictedMs: 1, prefillTokenUs: 50, lookupBudgetMs: 2 }, holdAfterPins: true },
    { type: 'resume' },
  ])('a %j command goes through its codec unchanged', (command) => {
    expect(parseRankCommand(encodeRankCommand(command).trimEnd())).toEqual(command);
  });

  it.each<[string, string]>([
    ['{"type":"allocate","count":-1}', 'demo message: command "allocate" .count must be a whole number ≥ 0'],
    ['{"type":"retain","slots":[1],"hashes":["xyz"],"append":[],"publishInventory":true}', 'demo message: command "retain" .hashes[0] must be a 16-digit hex block hash'],
    ['{"type":"pull","hashes":[],"source":{"workerId":"d","incarnation":"i"},"holdAfterPins":false}', 'demo message: command "pull" .source.epoch must be a whole number ≥ 0'],
    ['{"type":"evict"}', 'demo message: command type must be one of allocate, hand-off, retain, pull, resume; got "evict"'],
    ['not json', 'demo message: command line is not JSON: "not json"'],
  ])('refuses the command %s, naming the field', (line, message) => {
    expect(() => parseRankCommand(line)).toThrow(DemoMessageError);
    expect(() => parseRankCommand(line)).toThrow(message);
  });

  it('reads a rank message back, and takes a line that is no message for a log line', () => {
    const message: RankMessage = { type: 'pinned', role: 'prefill', tpRank: 0, blocks: [42, 42] };
    expect(parseRankMessage(encodeRankMessage(message))).toEqual(message);
    expect(parseRankMessage('[UCX] warning: something')).toBeUndefined();
    expect(parseRankMessage('{"type":"log"}')).toBeUndefined();
  });

  it('refuses a rank message of a known type with a bad field', () => {
    expect(() => parseRankMessage('{"type":"retained","role":"decode","tpRank":1,"blocks":42,"verified":"all","appended":2}')).toThrow(
      'demo message: rank message "retained" .verified must be a whole number ≥ 0',
    );
    expect(() => parseRankMessage('{"type":"ready","role":"router","tpRank":0}')).toThrow("demo message: rank message \"ready\" .role must be 'decode' or 'prefill'");
  });
});
