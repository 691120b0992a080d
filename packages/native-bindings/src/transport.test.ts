import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { transport, ucxTestsRun } from '../test/support/backends.js';
import { LibraryLoadError, LibraryNotFoundError } from './errors.js';
import { defaultLibraryPaths } from './library.js';
import { loadTransport } from './transport.js';

describe('loadTransport', () => {
  it.skipIf(process.env['KVREUSE_TRANSPORT_LIBRARY'] !== undefined)(
    'finds the library built in the repository by default',
    () => {
      expect(defaultLibraryPaths()).toContain(loadTransport().libraryPath);
    },
  );

  it('looks in the repository build, then the platform package of this machine, then the package build', () => {
    const packageDir = fileURLToPath(new URL('..', import.meta.url));
    expect(defaultLibraryPaths()).toEqual([
      resolve(packageDir, '../../native/build/libkvreuse_transport.so'),
      resolve(packageDir, `../native-linux-${process.arch}-gnu/libkvreuse_transport.so`),
      resolve(packageDir, 'native/build/libkvreuse_transport.so'),
    ]);
  });

  it('refuses a path with no library, naming it', () => {
    const missing = join(tmpdir(), `no-such-${process.pid}.so`);
    const error = (() => {
      try {
        loadTransport({ libraryPath: missing });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(LibraryNotFoundError);
    expect(error).toMatchObject({ code: 'LIBRARY_NOT_FOUND', searched: [missing] });
  });

  it('refuses a file that is not a shared library', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvreuse-not-a-library-'));
    try {
      const bogus = join(dir, 'not-a-library.so');
      writeFileSync(bogus, 'not ELF');
      expect(() => loadTransport({ libraryPath: bogus })).toThrow(LibraryLoadError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('loads the same file once and answers for it', () => {
    expect(loadTransport({ libraryPath: transport.libraryPath }).libraryPath).toBe(transport.libraryPath);
  });
});

describe('capabilities', () => {
  it('reports the backends built, VRAM support with its reason, and the limits', () => {
    const caps = transport.capabilities();
    expect(caps.backends).toContain('loopback');
    if (ucxTestsRun)
      expect(caps.backendsDetail).toBe("loopback (always) and ucx (built in; UCX's libucp.so.0 loaded at run time)");
    expect(caps.version).toMatch(/^\d+\.\d+\.\d+/);
    if (!caps.vram.supported) expect(caps.vram.reason).toMatch(/vram|GPU/i);
    expect(caps.limits).toEqual({
      maxDescriptors: 1 << 20,
      maxNotificationBytes: 4096,
      maxNameBytes: 255,
      maxRegions: 65536,
      maxPendingNotifications: 65536,
    });
  });
});
