import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { thrown } from '../test/thrown.js';
import { InvalidGroupError } from './errors.js';
import { defineGroup, isSettingsGroup } from './group.js';

const groupError = (run: () => unknown): InvalidGroupError => thrown(run, InvalidGroupError);

describe('defineGroup', () => {
  it('makes a frozen group of settings and rules that any copy of the package recognises', () => {
    const group = defineGroup('cache', {
      description: 'A cache.',
      settings: {
        sizeBlocks: {
          schema: z.int().min(1),
          default: 64,
          unit: 'blocks',
          description: 'How many blocks the cache holds.',
        },
        highWaterBlocks: { schema: z.int().min(1), default: 48, unit: 'blocks', description: 'When eviction starts.' },
      },
      rules: [
        {
          setting: 'highWaterBlocks',
          related: ['sizeBlocks'],
          rule: 'cache.high_water_blocks ≤ cache.size_blocks',
          why: 'eviction starts before the cache is full.',
          holds: (cache) => cache.highWaterBlocks <= cache.sizeBlocks,
        },
      ],
    });
    expect(group.name).toBe('cache');
    expect(Object.keys(group.settings)).toEqual(['sizeBlocks', 'highWaterBlocks']);
    expect(Object.isFrozen(group)).toBe(true);
    expect(isSettingsGroup(group)).toBe(true);
    expect(isSettingsGroup({ ...group })).toBe(true);
    expect(isSettingsGroup({ name: 'cache', settings: {} })).toBe(false);
  });

  it('keeps its own copy of the declaration: changing it afterwards changes nothing the group checked', () => {
    const ports = ['a'];
    const settings = {
      sizeBlocks: { schema: z.int().min(1), default: 64 as number, description: 'How many blocks.' },
      names: { schema: z.array(z.string()), default: ports, description: 'Names.' },
    };
    const rule = {
      setting: 'sizeBlocks' as const,
      related: ['names' as const],
      rule: 'cache.size_blocks ≥ 1',
      why: 'a cache holds something.',
      holds: (cache: { sizeBlocks: number }) => cache.sizeBlocks >= 1,
    };
    const group = defineGroup('cache', { description: 'A cache.', settings, rules: [rule] });
    settings.sizeBlocks.default = -1;
    ports.push('b');
    rule.holds = () => false;
    rule.related.push('sizeBlocks' as never);
    expect(group.settings.sizeBlocks!.default).toBe(64);
    expect(group.settings.names!.default).toEqual(['a']);
    expect(group.rules[0]!.holds({ sizeBlocks: 64, names: ['a'] })).toBe(true);
    expect(group.rules[0]!.related).toEqual(['names']);
  });

  it('lists every problem of a declaration at once', () => {
    const error = groupError(() =>
      defineGroup('Cache-2', {
        description: '',
        settings: {
          size_blocks: { schema: z.int().min(1), default: 0, description: 'Size.' },
          mode: { schema: 'fast', default: 'fast', description: 'Mode.' } as never,
        },
        rules: [{ setting: 'nope' as never, related: [], rule: 'r', why: 'w', holds: () => true }],
        extra: true,
      } as never),
    );
    expect(error.code).toBe('INVALID_GROUP');
    expect(error.problems).toEqual([
      'the name must be one lowercase word (a-z), not "no", "constructor" or "prototype"',
      'unknown field extra (fields: description, settings, rules)',
      'description must be a non-empty string',
      'setting size_blocks: the name must be camelCase (a-z, A-Z, 0-9, starting with a-z)',
      'setting size_blocks: the default does not pass its schema',
      'setting mode: must have a zod schema',
      'rule 0 (r): nope is not a setting of the group',
    ]);
  });

  it('refuses the name no (it would read as a negated flag), constructor or prototype, no settings, and defaults that break a rule', () => {
    expect(
      groupError(() =>
        defineGroup('no', {
          description: 'd',
          settings: { a: { schema: z.boolean(), default: false, description: 'a' } },
        }),
      ).problems,
    ).toEqual(['the name must be one lowercase word (a-z), not "no", "constructor" or "prototype"']);
    for (const name of ['constructor', 'prototype']) {
      expect(
        groupError(() =>
          defineGroup(name, {
            description: 'd',
            settings: { a: { schema: z.boolean(), default: false, description: 'a' } },
          }),
        ).problems,
      ).toEqual(['the name must be one lowercase word (a-z), not "no", "constructor" or "prototype"']);
    }
    expect(groupError(() => defineGroup('empty', { description: 'd', settings: {} })).problems).toEqual([
      'settings must be an object of at least one setting',
    ]);
    const broken = groupError(() =>
      defineGroup('pair', {
        description: 'd',
        settings: {
          low: { schema: z.int(), default: 5, description: 'low' },
          high: { schema: z.int(), default: 1, description: 'high' },
        },
        rules: [
          {
            setting: 'high',
            related: ['low'],
            rule: 'pair.high ≥ pair.low',
            why: 'w',
            holds: ({ low, high }) => high >= low,
          },
        ],
      }),
    );
    expect(broken.problems).toEqual([
      'setting high: the defaults break rule pair.high ≥ pair.low (defaults: high 1, low 5)',
    ]);
    expect(broken.message).toBe(
      'settings group pair: setting high: the defaults break rule pair.high ≥ pair.low (defaults: high 1, low 5)',
    );
  });

  it('refuses a rule that throws on the defaults, naming the rule, with what it threw as the cause', () => {
    const failure = new RangeError('no ratio of zero');
    const error = groupError(() =>
      defineGroup('ratio', {
        description: 'd',
        settings: { part: { schema: z.int(), default: 0, description: 'part' } },
        rules: [
          {
            setting: 'part',
            related: [],
            rule: 'ratio.part divides 8',
            why: 'w',
            holds: () => {
              throw failure;
            },
          },
        ],
      }),
    );
    expect([error.group, error.problems, error.cause, error.message]).toEqual([
      'ratio',
      ['the rule of setting part (ratio.part divides 8) threw instead of answering: no ratio of zero'],
      failure,
      'settings group ratio: the rule of setting part (ratio.part divides 8) threw instead of answering: no ratio of zero',
    ]);
  });
});
