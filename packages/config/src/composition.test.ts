import { describe, expect, it } from 'vitest';
import { compose } from './composition.js';
import { routerGroup, transportGroup } from '../test/sample-groups.js';

describe('compose', () => {
  it('indexes the composed settings by every name a source writes, and holds their rules', () => {
    const composition = compose([routerGroup, transportGroup], 'ignore');
    expect([...composition.groupNames]).toEqual(['router', 'transport']);
    expect(composition.settings).toHaveLength(
      Object.keys(routerGroup.settings).length + Object.keys(transportGroup.settings).length,
    );
    const backend = composition.byPath.get('transport.backend');
    expect(composition.byFileKey.get('transport.backend')).toBe(backend);
    expect(composition.byFlag.get('--transport-backend')).toBe(backend);
    expect(composition.byEnv.get('KVREUSE_TRANSPORT_BACKEND')).toBe(backend);
    expect(composition.byPath.get('discovery.backend')).toBeUndefined();
    expect(composition.rules.map(({ group, description }) => [group, description.setting])).toEqual([
      ['router', 'router.enableDecodeToPrefillGpuReuse'],
      ['transport', 'transport.abandonTimeoutMs'],
      ['transport', 'transport.shutdownDeadlineMs'],
    ]);
    expect(composition.rules[1]?.holds({ operationTimeoutMs: 1000, abandonTimeoutMs: 1999 } as never)).toBe(false);
    expect(composition.foreignGroups).toBe('ignore');
  });
});
