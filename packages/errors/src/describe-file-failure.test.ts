import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeFileFailure } from './describe-file-failure.js';

const folder = mkdtempSync(join(tmpdir(), 'describe-file-failure-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

function failureOfReading(path: string): unknown {
  try {
    readFileSync(path);
  } catch (error) {
    return error;
  }
  throw new Error(`${path} was read`);
}

describe('describeFileFailure', () => {
  it('names the failures of a mistyped path in words', () => {
    writeFileSync(join(folder, 'file'), '');
    symlinkSync(join(folder, 'loop'), join(folder, 'loop'));
    expect(
      [
        join(folder, 'missing'),
        folder,
        join(folder, 'file', 'below'),
        join(folder, 'x'.repeat(300)),
        join(folder, 'loop'),
      ].map((path) => describeFileFailure(failureOfReading(path))),
    ).toEqual([
      'no such file',
      'a directory, not a file',
      'a folder in its path is a file',
      'a name in it is longer than the file system allows',
      'it goes through a loop of symbolic links',
    ]);
  });

  it("gives any other failure the system's message", () => {
    const denied = Object.assign(new Error('EACCES: permission denied, open /x'), { code: 'EACCES' });
    expect([describeFileFailure(denied), describeFileFailure('not an error')]).toEqual([
      'EACCES: permission denied, open /x',
      'not an error',
    ]);
  });
});
