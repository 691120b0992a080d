import { describe, expect, it } from 'vitest';
import { closestName, kebabCase, snakeCase, upperSnakeCase } from './names.js';

describe('naming', () => {
  it('derives snake, kebab and upper-snake forms from a camelCase name', () => {
    expect(snakeCase('minimumTransferPrefixBlocks')).toBe('minimum_transfer_prefix_blocks');
    expect(kebabCase('transferSourceGpuEstimatedBlockUs')).toBe('transfer-source-gpu-estimated-block-us');
    expect(upperSnakeCase('leaseTtlMs')).toBe('LEASE_TTL_MS');
    expect(snakeCase('router')).toBe('router');
  });
});

describe('closestName', () => {
  const candidates = [
    'router.minimum_transfer_prefix_blocks',
    'router.minimum_estimated_ttft_saving_ms',
    'transport.backend',
  ];

  it('finds the candidate one typo away', () => {
    expect(closestName('router.minimum_transfer_prefix_block', candidates)).toBe(
      'router.minimum_transfer_prefix_blocks',
    );
    expect(closestName('transprot.backend', candidates)).toBe('transport.backend');
  });

  it('ignores case and separators, so a camelCase key finds its snake_case setting', () => {
    expect(closestName('router.minimumTransferPrefixBlocks', candidates)).toBe('router.minimum_transfer_prefix_blocks');
    expect(closestName('ROUTER-MINIMUM-ESTIMATED-TTFT-SAVING-MS', candidates)).toBe(
      'router.minimum_estimated_ttft_saving_ms',
    );
  });

  it('always names the closest candidate, and nothing only when there are no candidates or the name is far too long to be a typo', () => {
    expect(closestName('zzz', candidates)).toBe('transport.backend');
    expect(closestName('anything', [])).toBeUndefined();
    expect(closestName(`transport.backend${'x'.repeat(112)}`, candidates)).toBe('transport.backend');
    expect(closestName(`transport.backend${'x'.repeat(113)}`, candidates)).toBeUndefined();
  });

  it('prefers the earlier of two candidates at the same distance, whatever their lengths', () => {
    expect(closestName('ab', ['abcd', 'a', 'b'])).toBe('a');
    expect(closestName('abc', ['abd', 'ab', 'abcd'])).toBe('abd');
  });
});
