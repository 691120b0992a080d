import { describe, expect, it } from 'vitest';
import { defineSettings, InvalidSettingError } from '@kvreuse/config';
import { routerGroup } from './settings.js';

describe('routerGroup', () => {
  const router = defineSettings([routerGroup]);

  it('keeps reuse off by default', () => {
    expect(router.defaults.router).toMatchObject({
      enableDecodeToPrefillReuse: false,
      enableDecodeToPrefillGpuReuse: false,
      minimumTransferPrefixBlocks: 4,
    });
  });

  it('refuses GPU reuse without reuse', () => {
    expect(() => router.resolve({ argv: ['--router-enable-decode-to-prefill-gpu-reuse'] })).toThrow(
      InvalidSettingError,
    );
    expect(
      router.resolve({
        argv: ['--router-enable-decode-to-prefill-reuse', '--router-enable-decode-to-prefill-gpu-reuse'],
      }).settings.router.enableDecodeToPrefillGpuReuse,
    ).toBe(true);
  });
});
