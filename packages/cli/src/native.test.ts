import { kvreuseSettings } from '@kvreuse/config';
import { loadTransport } from '@kvreuse/native-bindings';
import { describe, expect, it } from 'vitest';
import { nativeCapabilities } from './native.js';

describe('nativeCapabilities', () => {
  it('loads the default library when transport.library is empty', () => {
    expect(nativeCapabilities(kvreuseSettings.defaults, '/')).toEqual(loadTransport().capabilities());
  });

  it('loads transport.library, relative to the working directory, and names it when it is not there', () => {
    const { settings } = kvreuseSettings.resolve({ argv: ['--transport-library', 'lib/none.so'] });
    expect(() => nativeCapabilities(settings, '/nowhere')).toThrow(expect.objectContaining({ code: 'LIBRARY_NOT_FOUND', message: expect.stringContaining('"/nowhere/lib/none.so"') }));
  });
});
