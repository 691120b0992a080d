import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { composed } from '../test/support.js';
import { builtInProfile } from './built-in.js';
import { loadProfileFile } from './profile-file.js';

describe('loadProfileFile', () => {
  let folder: string;
  beforeEach(() => {
    folder = mkdtempSync(join(tmpdir(), 'kvreuse-profiles-'));
  });
  afterEach(() => rmSync(folder, { recursive: true, force: true }));

  const write = (name: string, text: string): string => {
    const file = join(folder, name);
    writeFileSync(file, text);
    return file;
  };

  it('loads a user profile, checked like any profile', () => {
    const qwen = builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed });
    const file = write(
      'mine.json',
      JSON.stringify({ ...qwen, name: 'qwen-mine', blockHash: { ...qwen.blockHash, seed: 'qwen@rev-2' } }),
    );
    expect(loadProfileFile(file, { settings: composed })).toMatchObject({
      name: 'qwen-mine',
      blockHash: { seed: 'qwen@rev-2' },
      geometry: qwen.geometry,
    });
  });

  it('refuses a malformed profile naming the file and the path of every problem', () => {
    const qwen = builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed });
    const file = write(
      'bad.json',
      JSON.stringify({ ...qwen, version: 0, roles: { decode: { ...qwen.roles.decode, tpSize: 3 } } }),
    );
    expect(() => loadProfileFile(file, { settings: composed })).toThrow(
      expect.objectContaining({
        code: 'INVALID_PROFILE',
        source: file,
        issues: [expect.objectContaining({ path: 'version', value: 0 })],
        message: expect.stringContaining(`invalid deployment profile in ${file}: version = 0`),
      }),
    );
  });

  it('refuses a file that is missing, a directory or not JSON, naming it and why in words', () => {
    const missing = join(folder, 'nope.json');
    expect(() => loadProfileFile(missing, { settings: composed })).toThrow(
      expect.objectContaining({
        code: 'PROFILE_FILE_UNREADABLE',
        file: missing,
        message: `cannot load the deployment profile ${missing}: no such file`,
      }),
    );
    expect(() => loadProfileFile(folder, { settings: composed })).toThrow(
      expect.objectContaining({
        code: 'PROFILE_FILE_UNREADABLE',
        file: folder,
        message: `cannot load the deployment profile ${folder}: a directory, not a file`,
      }),
    );
    const file = write('broken.json', '{ "name": ');
    expect(() => loadProfileFile(file, { settings: composed })).toThrow(
      expect.objectContaining({
        code: 'PROFILE_FILE_UNREADABLE',
        file,
        message: expect.stringContaining(`cannot load the deployment profile ${file}: not JSON: `),
      }),
    );
  });
});
