import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kvreuseSettings } from './settings/all-settings.js';
import { loadTransport } from '@kvreuse/native-bindings';
import { afterAll, describe, expect, it } from 'vitest';
import { nativeCapabilities, requireUcx } from './native.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-cli-native-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const missingFrom = (source: string) =>
  expect.objectContaining({
    code: 'INPUT_FILE',
    exitCode: 2,
    message: `/nowhere/lib/none.so: no such file, so no native library to load (transport.library from ${source})`,
    cause: expect.objectContaining({ code: 'LIBRARY_NOT_FOUND' }),
  });

describe('nativeCapabilities', () => {
  it('loads the default library when transport.library is empty', () => {
    expect(nativeCapabilities(kvreuseSettings.resolve(), '/')).toEqual(loadTransport().capabilities());
  });

  it('loads transport.library, relative to the working directory; one that is not there is INPUT_FILE naming the setting and its source', () => {
    const file = join(dir, 'kvreuse.yaml');
    writeFileSync(file, 'transport:\n  library: lib/none.so\n');
    const sources = [
      [kvreuseSettings.resolve({ argv: ['--transport-library', 'lib/none.so'] }), 'argv --transport-library'],
      [kvreuseSettings.resolve({ env: { KVREUSE_TRANSPORT_LIBRARY: 'lib/none.so' } }), 'env KVREUSE_TRANSPORT_LIBRARY'],
      [kvreuseSettings.resolve({ file }), `file ${file}:2`],
    ] as const;
    for (const [resolved, source] of sources)
      expect(() => nativeCapabilities(resolved, '/nowhere')).toThrow(missingFrom(source));
  });

  it('requireUcx: the capabilities when the library has the ucx backend', () => {
    const capabilities = loadTransport().capabilities();
    expect(capabilities.backends).toContain('ucx');
    expect(requireUcx('demo', kvreuseSettings.resolve(), '/')).toEqual(capabilities);
  });

  it('requireUcx: a transport.library that is not there is INPUT_FILE naming the setting, with the lookup error as its cause', () => {
    const resolved = kvreuseSettings.resolve({ argv: ['--transport-library', 'lib/none.so'] });
    expect(() => requireUcx('demo', resolved, '/nowhere')).toThrow(missingFrom('argv --transport-library'));
  });
});
