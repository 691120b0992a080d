import { describe, expect, it } from 'vitest';
import { defineSettings, InvalidSettingError } from '@kvreuse/config';
import { frontendGroup } from './frontend.js';

describe('frontendGroup', () => {
  const frontend = defineSettings([frontendGroup]);

  it('resolves alone, to its defaults, and refuses a value that breaks its type', () => {
    expect(frontend.defaults).toEqual({ frontend: { rejectMediaStatusCode: 415 } });
    expect(() => frontend.resolve({ argv: ['--frontend-reject-media-status-code=200'] })).toThrow(InvalidSettingError);
  });
});
