import { describe, expect, it } from 'vitest';
import { statusCodeName, statusCodeNames, statusOf } from './status.js';

describe('status codes', () => {
  it('maps every KVT_ERR_* to its name and back', () => {
    expect(statusCodeName(-1)).toBe('INVALID_PARAM');
    expect(statusCodeName(-6)).toBe('BUSY');
    expect(statusCodeName(-11)).toBe('NO_MEMORY');
    for (const name of statusCodeNames) expect(statusCodeName(statusOf(name))).toBe(name);
  });

  it('names an unknown status by its number', () => {
    expect(statusCodeName(-99)).toBe('UNKNOWN_STATUS_-99');
  });
});
