import { kvreuseSettings } from './settings/all-settings.js';
import { loadTransport } from '@kvreuse/native-bindings';
import { describe, expect, it } from 'vitest';
import { nativeCapabilities, requireUcx } from './native.js';

describe('nativeCapabilities', () => {
  it('loads the default library when transport.library is empty', () => {
    expect(nativeCapabilities(kvreuseSettings.defaults, '/')).toEqual(loadTransport().capabilities());
  });

  it('loads transport.library, relative to the working directory, and names it when it is not there', () => {
    const { settings } = kvreuseSettings.resolve({ argv: ['--transport-library', 'lib/none.so'] });
    expect(() => nativeCapabilities(settings, '/nowhere')).toThrow(
      expect.objectContaining({
        code: 'LIBRARY_NOT_FOUND',
        message: expect.stringContaining('"/nowhere/lib/none.so"'),
      }),
    );
  });

  it('requireUcx: the capabilities when the library has the ucx backend', () => {
    const capabilities = loadTransport().capabilities();
    expect(capabilities.backends).toContain('ucx');
    expect(requireUcx('demo', kvreuseSettings.defaults, '/')).toEqual(capabilities);
  });

  it('requireUcx: a missing library is TRANSPORT_UNAVAILABLE with the lookup error as its cause', () => {
    const { settings } = kvreuseSettings.resolve({ argv: ['--transport-library', 'lib/none.so'] });
    expect(() => requireUcx('demo', settings, '/nowhere')).toThrow(
      expect.objectContaining({
        code: 'TRANSPORT_UNAVAILABLE',
        message: expect.stringContaining('"/nowhere/lib/none.so"'),
        cause: expect.objectContaining({ code: 'LIBRARY_NOT_FOUND' }),
      }),
    );
  });
});
