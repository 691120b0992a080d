import { describe, expect, it } from 'vitest';
import { defineSettings, InvalidSettingError } from '@kvreuse/config';
import { endpointGroup } from './settings.js';

describe('endpointGroup', () => {
  const endpoint = defineSettings([endpointGroup]);

  it('verifies every block and serves no metrics by default', () => {
    expect(endpoint.defaults).toEqual({ endpoint: { verify: 'full', metricsPort: 0, metricsHost: '127.0.0.1' } });
  });

  it.each([
    [['--endpoint-verify', 'sampled'], { verify: 'sampled' }],
    [['--endpoint-verify=off'], { verify: 'off' }],
    [['--endpoint-metrics-port', '9400'], { metricsPort: 9400 }],
    [['--endpoint-metrics-port=65535'], { metricsPort: 65_535 }],
    [['--endpoint-metrics-host=0.0.0.0'], { metricsHost: '0.0.0.0' }],
    [['--endpoint-metrics-host=::1'], { metricsHost: '::1' }],
    [['--endpoint-metrics-host=metrics.node-3.internal'], { metricsHost: 'metrics.node-3.internal' }],
  ])('takes %j', (argv, values) => {
    expect(endpoint.resolve({ argv }).settings.endpoint).toMatchObject(values);
  });

  it('reads the variables and the file section too', () => {
    const fromEnv = endpoint.resolve({
      env: { KVREUSE_ENDPOINT_VERIFY: 'off', KVREUSE_ENDPOINT_METRICS_PORT: '9400' },
    });
    expect(fromEnv.settings.endpoint).toMatchObject({ verify: 'off', metricsPort: 9400 });
    const fromFile = endpoint.resolve({
      file: { text: 'endpoint:\n  verify: sampled\n  metrics_port: 9500\n', origin: 'kvreuse.yaml' },
    });
    expect(fromFile.settings.endpoint).toMatchObject({ verify: 'sampled', metricsPort: 9500 });
    expect(fromFile.provenance.endpoint.metricsPort).toEqual({ source: 'file', path: 'kvreuse.yaml', line: 3 });
  });

  it.each([
    ['--endpoint-verify=partial', 'endpoint.verify'],
    ['--endpoint-metrics-port=65536', 'endpoint.metricsPort'],
    ['--endpoint-metrics-port=-1', 'endpoint.metricsPort'],
    ['--endpoint-metrics-port=94.5', 'endpoint.metricsPort'],
    ['--endpoint-metrics-port=ninety', 'endpoint.metricsPort'],
    ['--endpoint-metrics-host=', 'endpoint.metricsHost'],
    ['--endpoint-metrics-host=http://127.0.0.1', 'endpoint.metricsHost'],
    ['--endpoint-metrics-host=host name', 'endpoint.metricsHost'],
  ])('refuses %s, naming the flag and the value', (argv, setting) => {
    const [flag = '', value = ''] = argv.split(/=(.*)/s);
    const resolved = endpoint.safeResolve({ argv: [argv] });
    expect(resolved.success).toBe(false);
    if (resolved.success) return;
    expect(resolved.error).toBeInstanceOf(InvalidSettingError);
    expect((resolved.error as InvalidSettingError).invalid).toEqual([
      expect.objectContaining({ setting, name: flag, value }),
    ]);
    expect(resolved.error.message).toContain(`${flag} = ${JSON.stringify(value)} in argv`);
  });

  it('names the file key and line of a bad value in a settings file', () => {
    const resolved = endpoint.safeResolve({
      file: { text: 'endpoint:\n  metrics_port: 70000\n', origin: 'kvreuse.yaml' },
    });
    expect(resolved.success).toBe(false);
    if (resolved.success) return;
    expect(resolved.error.message).toContain('endpoint.metrics_port = 70000 in file kvreuse.yaml:2');
  });
});
