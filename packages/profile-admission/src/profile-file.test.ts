import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { TEXT_FILE_MAX_BYTES } from '@kvreuse/config';
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

  const unreadable = (file: string, reason: string): void => {
    expect(() => loadProfileFile(file, { settings: composed })).toThrow(
      expect.objectContaining({
        code: 'PROFILE_FILE_UNREADABLE',
        message: `cannot load the deployment profile ${file}: ${reason}`,
      }),
    );
  };

  it('refuses a device, such as /dev/null for /dev/zero, and a named pipe, without reading them', () => {
    unreadable('/dev/null', 'a device, not a regular file');
    const pipe = join(folder, 'pipe.json');
    execFileSync('mkfifo', [pipe]);
    unreadable(pipe, 'a named pipe, not a regular file');
  });

  it('refuses a file larger than 1 MiB before reading it, and bytes that are not UTF-8', () => {
    const large = write('large.json', '');
    truncateSync(large, TEXT_FILE_MAX_BYTES + 1);
    unreadable(large, `larger than ${TEXT_FILE_MAX_BYTES} bytes (${TEXT_FILE_MAX_BYTES + 1} bytes)`);
    const qwen = builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed });
    const latin1 = join(folder, 'latin1.json');
    const seeded = JSON.stringify({ ...qwen, name: 'qwen-latin1', blockHash: { ...qwen.blockHash, seed: 'caf\xe9' } });
    writeFileSync(latin1, Buffer.from(seeded, 'latin1'));
    unreadable(latin1, 'not UTF-8 text');
  });

  it('names a file given as a URL by its path, and refuses what is no path', () => {
    const spaced = join(folder, 'my profile.json');
    writeFileSync(spaced, '{ "name": ');
    expect(() => loadProfileFile(pathToFileURL(spaced), { settings: composed })).toThrow(
      expect.objectContaining({ file: spaced, message: expect.stringContaining(`profile ${spaced}: not JSON`) }),
    );
    for (const file of ['', 3, new URL('https://example.com/p.json')]) {
      expect(() => loadProfileFile(file as string, { settings: composed })).toThrow(
        expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'file', value: file }),
      );
    }
  });
});
