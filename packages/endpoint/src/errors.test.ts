import { describe, expect, it } from 'vitest';
import { EndpointError, EndpointOptionError, EndpointStateError } from './errors.js';

describe('endpoint errors', () => {
  it.each([
    [new EndpointOptionError('leaseMs', 0, 'a whole number of milliseconds ≥ 1'), 'INVALID_ENDPOINT_OPTION', 'endpoint option leaseMs = 0 is refused: a whole number of milliseconds ≥ 1'],
    [new EndpointStateError('fetch', 'created', ['ready']), 'ILLEGAL_ENDPOINT_STATE', 'fetch is not allowed while the endpoint is created (only while ready)'],
  ])(
    '%s carries its code and names the value',
    (error, code, message) => {
      expect(error).toBeInstanceOf(EndpointError);
      expect(error.code).toBe(code);
      expect(error.message).toBe(message);
      expect(error.name).toBe(error.constructor.name);
    },
  );
});
