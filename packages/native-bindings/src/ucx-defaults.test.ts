import { describe, expect, it } from 'vitest';
import { applyUcxDefaults, UCX_DEFAULTS } from './ucx-defaults.js';

describe('applyUcxDefaults', () => {
  it('sets every UCX default that is not set', () => {
    const environment: Record<string, string | undefined> = { PATH: '/usr/bin' };
    expect(applyUcxDefaults(environment)).toEqual([
      'UCX_MEM_MALLOC_HOOKS',
      'UCX_MEM_MMAP_HOOK_MODE',
      'UCX_HANDLE_ERRORS',
    ]);
    expect(environment).toEqual({
      PATH: '/usr/bin',
      UCX_MEM_MALLOC_HOOKS: 'no',
      UCX_MEM_MMAP_HOOK_MODE: 'none',
      UCX_HANDLE_ERRORS: 'none',
    });
  });

  it('keeps what the user set, even an empty value', () => {
    const environment: Record<string, string | undefined> = { UCX_MEM_MMAP_HOOK_MODE: 'bistro', UCX_HANDLE_ERRORS: '' };
    expect(applyUcxDefaults(environment)).toEqual(['UCX_MEM_MALLOC_HOOKS']);
    expect(environment).toEqual({
      UCX_MEM_MALLOC_HOOKS: UCX_DEFAULTS['UCX_MEM_MALLOC_HOOKS'],
      UCX_MEM_MMAP_HOOK_MODE: 'bistro',
      UCX_HANDLE_ERRORS: '',
    });
  });
});
