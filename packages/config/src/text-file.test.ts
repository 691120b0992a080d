import { describe, expect, it } from 'vitest';
import { temporaryDirectory } from '../test/temporary-directory.js';
import { readTextFile } from './text-file.js';

const { write } = temporaryDirectory('kvreuse-config-text-');

describe('readTextFile', () => {
  it('reads a file to its end, also one that states its size as 0 (as files of /proc do)', () => {
    const read = readTextFile('/proc/self/status');
    expect(read).toMatchObject({ ok: true, text: expect.stringMatching(/^Name:/) });
  });

  it('drops a byte-order mark, which JSON.parse would refuse', () => {
    const file = write('bom.json', '\uFEFF{"router": {}}');
    expect(readTextFile(file)).toEqual({ ok: true, text: '{"router": {}}' });
  });

  it('names what it cannot open in words', () => {
    expect(readTextFile(`${write('plain.yaml', '')}/below`)).toMatchObject({
      ok: false,
      reason: 'a folder in its path is a file',
    });
  });
});
