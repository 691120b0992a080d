import { describe, expect, it } from 'vitest';
import { defineSettings, InvalidSettingError } from '@kvreuse/config';
import { transportGroup } from './settings.js';

describe('transportGroup', () => {
  const transport = defineSettings([transportGroup]);

  it('defaults to UCX with deadlines that keep their rules', () => {
    expect(transport.defaults.transport).toMatchObject({
      backend: 'ucx',
      library: '',
      ucxNetDevices: '',
      ucxTransports: '',
      operationTimeoutMs: 1000,
      abandonTimeoutMs: 5000,
      shutdownDeadlineMs: 10_000,
    });
  });

  it('keeps abandon ≥ 2 × operation timeout and shutdown ≥ abandon', () => {
    expect(() => transport.resolve({ argv: ['--transport-operation-timeout-ms=2501'] })).toThrow(InvalidSettingError);
    expect(() => transport.resolve({ argv: ['--transport-shutdown-deadline-ms=4999'] })).toThrow(InvalidSettingError);
    expect(
      transport.resolve({ argv: ['--transport-operation-timeout-ms=2500'] }).settings.transport.operationTimeoutMs,
    ).toBe(2500);
  });

  it('confines UCX to the devices and transports named, and refuses a list with spaces', () => {
    const { settings } = transport.resolve({
      argv: ['--transport-ucx-net-devices=mlx5_0:1,eth1', '--transport-ucx-transports=rc,sm,self'],
    });
    expect(settings.transport).toMatchObject({ ucxNetDevices: 'mlx5_0:1,eth1', ucxTransports: 'rc,sm,self' });
    expect(() => transport.resolve({ argv: ['--transport-ucx-net-devices=lo eth0'] })).toThrow(InvalidSettingError);
  });
});
