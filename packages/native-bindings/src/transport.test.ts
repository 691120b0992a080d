import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { transport } from '../test/support/backends.js';
import { LibraryLoadError, LibraryNotFoundError } from './errors.js';
import { defaultLibraryPaths } from './library.js';
import { loadTransport } from './transport.js';

describe('loadTransport', () => {
  it.skipIf(process.env['KVREUSE_TRANSPORT_LIBRARY'] !== undefined)('finds the library built in the repository by default', () => {
    expect(defaultLibraryPaths()).toContain(loadTransport().libraryPath);
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
    const bogus = join(tmpdir(), `not-a-library-${process.pid}.so`);
    writeFileSync(bogus, 'not ELF');
    expect(() => loadTransport({ libraryPath: bogus })).toThrow(LibraryLoadError);
  });

  it('loads the same file once and answers for it', () => {
    expect(loadTransport({ libraryPath: transport.libraryPath }).libraryPath).toBe(transport.libraryPath);
  });
});

describe('capabilities', () => {
  it('reports the backends built, VRAM support with its reason, and the limits', () => {
    const caps = transport.capabilities();
    expect(caps.backends).toContain('loopback');
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
