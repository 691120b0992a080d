import { describe, expect, it } from 'vitest';
import { routerGroup } from '../test/sample-groups.js';
import { defineSettings } from './define-settings.js';
import { renderSettingsReport } from './settings-report.js';

describe('renderSettingsReport of one composition', () => {
  it('shows the composed settings, then every ignored setting of another group with where it was written', () => {
    const router = defineSettings([routerGroup], { foreignGroups: 'ignore' });
    const resolved = router.resolve({
      file: { text: 'transport:\n  backend: loopback\n', origin: 'shared.yaml' },
      env: { KVREUSE_DRAIN_FAILED_LOAD_POLICY: 'fail' },
    });
    const lines = renderSettingsReport(resolved).trimEnd().split('\n');
    expect(lines).toHaveLength(Object.keys(routerGroup.settings).length + 2);
    expect(lines[0]).toMatch(/^router\.enable_decode_to_prefill_reuse\s+false\s+the default$/);
    expect(lines.slice(-2)).toEqual([
      'ignored  transport.backend  file shared.yaml:2 (group transport not composed)',
      'ignored  KVREUSE_DRAIN_FAILED_LOAD_POLICY  env KVREUSE_DRAIN_FAILED_LOAD_POLICY (group drain not composed)',
    ]);
  });
});
