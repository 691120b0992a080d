import { describe, expect, it } from 'vitest';
import { LibraryMismatchError } from './errors.js';
import { checkApiVersion, type NativeLibrary } from './library.js';
import { loadTransport } from './transport.js';

/** A library whose kvt_version reports `version`: only the call the check makes. */
function reporting(major: number, minor: number): NativeLibrary {
  const kvt_version = (out: Uint32Array, outMinor: Uint32Array): number => {
    out[0] = major;
    outMinor[0] = minor;
    return 0;
  };
  return { path: '/lib/libkvreuse_transport.so', api: { kvt_version } } as unknown as NativeLibrary;
}

describe('checkApiVersion', () => {
  it('takes the facade’s major at its minor or later', () => {
    expect(() => checkApiVersion(reporting(0, 5))).not.toThrow();
    expect(() => checkApiVersion(reporting(0, 6))).not.toThrow();
  });

  it('refuses another major, and an older minor, naming what it found and what it needs', () => {
    expect(() => checkApiVersion(reporting(1, 5))).toThrow(LibraryMismatchError);
    expect(() => checkApiVersion(reporting(1, 5))).toThrow(/kvt_version\(\) major is 1, this facade needs 0/);
    expect(() => checkApiVersion(reporting(0, 4))).toThrow(
      /kvt_version\(\) minor is 4, this facade needs "5 or later"/,
    );
  });

  it('passes the library built from this repository’s header', () => {
    expect(loadTransport().capabilities().version).toMatch(/^0\.5\.\d+ /);
  });
});
