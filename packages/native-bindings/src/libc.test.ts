import { closeSync, fstatSync, openSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NativeTransportError } from './errors.js';
import { duplicateFd, libc, libcFailure } from './libc.js';

const EBADF = 9;

describe('libc', () => {
  it('is loaded once: every caller gets the same bound functions', () => {
    expect(libc()).toBe(libc());
    expect(libc().dup).toBe(libc().dup);
  });

  it('names the failing call and its errno', () => {
    expect(libc().close(-1)).toBe(-1);
    const error = libcFailure('close', 'closing fd -1');
    expect(error).toBeInstanceOf(NativeTransportError);
    expect(error).toMatchObject({ code: 'BACKEND', call: 'close', detail: `closing fd -1 failed with errno ${EBADF}` });
  });
});

describe('duplicateFd', () => {
  it('gives a new fd for the same open file, which outlives the original', () => {
    const fd = openSync('/dev/null', 'r');
    const duplicate = duplicateFd(fd, 'a test file');
    expect(duplicate).not.toBe(fd);
    expect(fstatSync(duplicate).ino).toBe(fstatSync(fd).ino);
    closeSync(fd);
    expect(fstatSync(duplicate).isCharacterDevice()).toBe(true);
    closeSync(duplicate);
  });

  it('refuses an fd that is not open with a BACKEND error naming the fd, what it was and errno', () => {
    expect(() => duplicateFd(-1, 'a closed pipe')).toThrow(
      expect.objectContaining({
        code: 'BACKEND',
        call: 'dup',
        detail: `dup(-1) of a closed pipe failed with errno ${EBADF}`,
      }),
    );
  });
});
