import { describe, expect, it } from 'vitest';
import { routerGroup, transportGroup } from '../test/sample-groups.js';
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

describe('renderSettingsReport of names and values from a settings file', () => {
  it('escapes their control characters, so none reaches the terminal and every entry stays one line', () => {
    const transport = defineSettings([transportGroup], { foreignGroups: 'ignore' });
    const resolved = transport.resolve({
      file: {
        text: 'transport:\n  library: "/opt/\\u001b[2J\\u009b31mlib"\nrouter:\n  "minimum\\nblocks": 4\n',
        origin: 'shared.yaml',
      },
    });
    const lines = renderSettingsReport(resolved).trimEnd().split('\n');
    expect(lines).toHaveLength(Object.keys(transportGroup.settings).length + 1);
    expect(lines.find((line) => line.startsWith('transport.library'))).toMatch(
      /^transport\.library +\/opt\/\\u001b\[2J\\u009b31mlib +file shared\.yaml:2$/,
    );
    expect(lines.at(-1)).toBe('ignored  router.minimum\\nblocks  file shared.yaml:4 (group router not composed)');
  });
});
