import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { routerGroup } from '../test/sample-groups.js';
import { compose } from './composition.js';
import { settingsFileJsonSchema } from './json-schema.js';

describe('settingsFileJsonSchema of one composition', () => {
  it('holds the composed groups only, and allows other groups under foreignGroups: ignore, never a name no group has', () => {
    const refusing = new Ajv2020({ strict: true }).compile(settingsFileJsonSchema(compose([routerGroup], 'error')));
    const ignoring = new Ajv2020({ strict: true }).compile(settingsFileJsonSchema(compose([routerGroup], 'ignore')));
    const shared = { router: { minimum_transfer_prefix_blocks: 8 }, transport: { heartbeat_interval_ms: 500 } };
    expect(refusing(shared)).toBe(false);
    expect(ignoring(shared)).toBe(true);
    expect(ignoring({ router: { minimum_transfer_prefix_block: 8 } })).toBe(false);
    expect(ignoring({ lease_ttl_ms: 1000 })).toBe(false);
    for (const section of ['constructor', 'prototype', 'no']) expect(ignoring({ [section]: { a: 1 } })).toBe(false);
  });
});
