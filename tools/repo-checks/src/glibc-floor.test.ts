import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { checkGlibcFloor, documentedGlibcFloor, symbolsAboveFloor } from './glibc-floor.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('the repository', () => {
  it('builds a native library that imports no glibc symbol newer than the documented floor', () => {
    const { checked, problems } = checkGlibcFloor(repoRoot);
    // The suite runs after the build: the library `make -C native` builds is there.
    expect(checked).toContain('native/build/libkvreuse_transport.so');
    expect(problems).toEqual([]);
  });

  it('reads the floor from docs/troubleshooting.md', () => {
    expect(documentedGlibcFloor(repoRoot)).toBe('2.34');
  });
});

describe('symbolsAboveFloor', () => {
  it('names each imported symbol whose GLIBC_ version is above the floor, and no defined one', () => {
    const objdump = [
      '0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.2.5) fopen',
      '0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.34) pthread_create',
      '0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.38) __isoc23_strtoull',
      '0000000000000000      DF *UND*	0000000000000000  GLIBC_2.35  __rseq_offset',
      '0000000000001234 g    DF .text	0000000000000010  Base        kvt_version',
    ].join('\n');
    expect(symbolsAboveFloor(objdump, '2.34')).toEqual(['__isoc23_strtoull@GLIBC_2.38', '__rseq_offset@GLIBC_2.35']);
    expect(symbolsAboveFloor(objdump, '2.38')).toEqual([]);
  });
});
