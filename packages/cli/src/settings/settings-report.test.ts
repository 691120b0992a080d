import { renderSettingsReport } from '@kvreuse/config';
import { describe, expect, it } from 'vitest';
import { resolveSettings, settingDescriptions } from './all-settings.js';

describe('renderSettingsReport', () => {
  it('shows every setting with its value and where it came from, one line each', () => {
    const report = renderSettingsReport(
      resolveSettings({
        file: { data: { transport: { backend: 'loopback' } }, origin: 'ops.yaml' },
        env: { KVREUSE_DISCOVERY_ETCD_ENDPOINTS: 'http://a:1,http://b:2' },
        argv: ['--router-minimum-transfer-prefix-blocks=8'],
      }),
    );
    const lines = report.trimEnd().split('\n');
    expect(lines).toHaveLength(settingDescriptions.length);
    const line = (key: string): string[] =>
      (lines.find((candidate) => candidate.startsWith(`${key} `)) ?? '').split(/\s{2,}/);
    expect(line('router.minimum_transfer_prefix_blocks')).toEqual([
      'router.minimum_transfer_prefix_blocks',
      '8',
      'argv --router-minimum-transfer-prefix-blocks',
    ]);
    expect(line('transport.backend')).toEqual(['transport.backend', 'loopback', 'file ops.yaml']);
    expect(line('discovery.etcd_endpoints')).toEqual([
      'discovery.etcd_endpoints',
      'http://a:1,http://b:2',
      'env KVREUSE_DISCOVERY_ETCD_ENDPOINTS',
    ]);
    expect(line('transport.library')).toEqual(['transport.library', '""', 'the default']);
    expect(line('frontend.reject_media_status_code')).toEqual([
      'frontend.reject_media_status_code',
      '415',
      'the default',
    ]);
  });
});
