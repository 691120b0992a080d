import { describe, expect, it } from 'vitest';
import { defineSettings } from '../define-settings.js';
import { InvalidSettingError } from '../errors.js';
import { discoveryGroup } from './discovery.js';

describe('discoveryGroup', () => {
  const discovery = defineSettings([discoveryGroup]);

  it('resolves alone, to its defaults, and refuses a value that breaks its type', () => {
    expect(discovery.defaults).toEqual({ discovery: { backend: 'sqlite', sqlitePath: 'kvreuse-discovery.sqlite', etcdEndpoints: ['http://127.0.0.1:2379'], secretFile: '', leaseTtlMs: 10_000 } });
    expect(() => discovery.resolve({ argv: ['--discovery-lease-ttl-ms=1500'] })).toThrow(InvalidSettingError);
  });
});
