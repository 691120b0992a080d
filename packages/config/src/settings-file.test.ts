import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { temporaryDirectory } from '../test/temporary-directory.js';
import { thrown } from '../test/thrown.js';
import { ConfigArgumentError, SettingsFileError } from './errors.js';
import { findSettingsFile, formatOfPath, loadSettingsFile } from './settings-file.js';
import { TEXT_FILE_MAX_BYTES } from './text-file.js';

const { path: directory, write } = temporaryDirectory('kvreuse-config-file-');

const fileError = (run: () => unknown): SettingsFileError => thrown(run, SettingsFileError);

describe('loadSettingsFile', () => {
  it('reads YAML and JSON paths by extension, as a string or { path }', () => {
    const yamlPath = write('a.yaml', 'router:\n  minimum_transfer_prefix_blocks: 8\n');
    const jsonPath = write('a.json', '{ "router": { "minimum_transfer_prefix_blocks": 8 } }');
    const expected = { router: { minimum_transfer_prefix_blocks: 8 } };
    expect(loadSettingsFile(yamlPath)).toMatchObject({ origin: yamlPath, data: expected });
    expect(loadSettingsFile({ path: jsonPath })).toMatchObject({ origin: jsonPath, data: expected });
    expect(formatOfPath('/x/settings.JSON')).toBe('json');
    expect(formatOfPath('/x/settings.yml')).toBe('yaml');
    expect(formatOfPath('/x/settings')).toBe('yaml');
  });

  it('reads a file without a known extension as YAML, which also reads JSON', () => {
    const path = write('kvreuse.conf', '{ "transport": { "backend": "loopback" } }');
    expect(loadSettingsFile(path).data).toEqual({ transport: { backend: 'loopback' } });
  });

  it('takes text and data already loaded, named by origin', () => {
    expect(loadSettingsFile({ text: 'drain:\n  failed_load_policy: fail\n' })).toMatchObject({
      origin: '<inline>',
      data: { drain: { failed_load_policy: 'fail' } },
    });
    expect(loadSettingsFile({ text: '{"drain": {}}', format: 'json', origin: 'from-configmap' }).origin).toBe(
      'from-configmap',
    );
    const data = { router: {} };
    expect(loadSettingsFile({ data, origin: 'object' })).toEqual({
      origin: 'object',
      data,
      lines: new Map(),
      numbers: new Map(),
    });
  });

  it('keeps the line of every section and key, in YAML and in JSON', () => {
    const yaml = loadSettingsFile({
      text: '# kvreuse\nrouter:\n  # the floor\n  minimum_transfer_prefix_blocks: 8\n\ntransport:\n  backend: ucx\n',
    });
    expect(yaml.lines.get('router')).toEqual({ line: 2, keys: new Map([['minimum_transfer_prefix_blocks', 4]]) });
    expect(yaml.lines.get('transport')).toEqual({ line: 6, keys: new Map([['backend', 7]]) });
    const json = loadSettingsFile(write('lines.json', '{\n  "drain": {\n    "failed_load_policy": "fail"\n  }\n}\n'));
    expect(json.lines.get('drain')).toEqual({ line: 2, keys: new Map([['failed_load_policy', 3]]) });
  });

  it('keeps the numbers of every key as written, its own or its list items, in YAML and in JSON', () => {
    const yaml = loadSettingsFile({
      text: 'router:\n  saving: 0.99999999999999999\n  name: "1.5"\n  sizes: [1e-400, two, 0x1F]\n',
    });
    expect(yaml.data).toEqual({ router: { saving: 1, name: '1.5', sizes: [0, 'two', 31] } });
    expect(yaml.numbers).toEqual(
      new Map([
        ['router.saving', ['0.99999999999999999']],
        ['router.sizes', ['1e-400', '0x1F']],
      ]),
    );
    const json = loadSettingsFile({ text: '{"router": {"saving": 1.50, "sizes": [2E+3]}}', format: 'json' });
    expect(json.numbers).toEqual(
      new Map([
        ['router.saving', ['1.50']],
        ['router.sizes', ['2E+3']],
      ]),
    );
  });

  it('reads an empty document as null (no settings)', () => {
    expect(loadSettingsFile({ text: '# nothing yet\n' }).data).toBeNull();
  });

  it('refuses input of the wrong shape with a typed error, reading nothing', () => {
    for (const [input, problem] of [
      [null, 'the input must be a path'],
      [5, 'the input must be a path'],
      [{ path: 3 }, 'path must be a non-empty string'],
      [{ path: '' }, 'path must be a non-empty string'],
      [{ text: 5 }, 'text must be a string'],
      [{ text: 'a: 1', format: 'xml' }, 'format must be yaml or json'],
    ] as const) {
      const error = fileError(() => loadSettingsFile(input as never));
      expect(error.message, JSON.stringify(input)).toContain(problem);
    }
  });

  it('names the path of a file it cannot read', () => {
    const missing = join(directory, 'missing.yaml');
    const error = fileError(() => loadSettingsFile(missing));
    expect(error.code).toBe('SETTINGS_FILE');
    expect(error.path).toBe(missing);
    expect(error.message).toContain(`settings file ${missing}: cannot be read`);
  });

  it('refuses a device, such as /dev/null for /dev/zero, as no regular file, without reading it', () => {
    const error = fileError(() => loadSettingsFile('/dev/null'));
    expect(error.message).toBe('settings file /dev/null: cannot be read: a device, not a regular file');
    expect(fileError(() => loadSettingsFile(directory)).message).toBe(
      `settings file ${directory}: cannot be read: a directory, not a file`,
    );
  });

  it('refuses a named pipe at once, with no writer to wait for', () => {
    const pipe = join(directory, 'pipe.yaml');
    execFileSync('mkfifo', [pipe]);
    expect(fileError(() => loadSettingsFile(pipe)).message).toBe(
      `settings file ${pipe}: cannot be read: a named pipe, not a regular file`,
    );
  });

  it('refuses a file larger than TEXT_FILE_MAX_BYTES before reading it, and bytes that are not UTF-8', () => {
    const large = write('large.yaml', '');
    truncateSync(large, TEXT_FILE_MAX_BYTES + 1);
    expect(fileError(() => loadSettingsFile(large)).message).toBe(
      `settings file ${large}: cannot be read: larger than ${TEXT_FILE_MAX_BYTES} bytes (${TEXT_FILE_MAX_BYTES + 1} bytes)`,
    );
    const latin1 = write('latin1.yaml', '');
    writeFileSync(latin1, Buffer.from('inventory:\n  hash_seed: caf\xe9\n', 'latin1'));
    expect(fileError(() => loadSettingsFile(latin1)).message).toBe(
      `settings file ${latin1}: cannot be read: not UTF-8 text`,
    );
  });

  it('refuses broken YAML, duplicate keys, and JSON that is not strict JSON', () => {
    expect(fileError(() => loadSettingsFile(write('bad.yaml', 'router: [1\n'))).message).toMatch(/not valid YAML/);
    expect(fileError(() => loadSettingsFile({ text: 'router:\n  a: 1\n  a: 2\n' })).message).toMatch(/unique/);
    expect(fileError(() => loadSettingsFile(write('dup.json', '{"router": {}, "router": {}}'))).message).toMatch(
      /not valid JSON.*unique/,
    );
    expect(
      fileError(() => loadSettingsFile(write('yes.json', '{"router": {"enable_decode_to_prefill_reuse": yes}}')))
        .message,
    ).toMatch(/not valid JSON/);
  });

  it('reads JSON as JSON: a trailing comma or a comment, which YAML would take, is refused with where it is', () => {
    expect(
      fileError(() => loadSettingsFile(write('comma.json', '{"router": {"minimum_transfer_prefix_blocks": 4,},}')))
        .message,
    ).toMatch(
      /^settings file .*comma\.json: not valid JSON: .* in JSON at line 1, column 49:\n\n\{"router".*\n {48}\^\n$/,
    );
    expect(fileError(() => loadSettingsFile({ text: '# c\n{}', format: 'json' })).message).toMatch(/not valid JSON/);
    expect(loadSettingsFile({ text: '', format: 'json' }).data).toBeNull();
  });

  it('refuses a YAML alias without its anchor, and an alias bomb, as broken YAML', () => {
    expect(fileError(() => loadSettingsFile({ text: 'router: *missing\n' })).message).toMatch(
      /not valid YAML: Unresolved alias/,
    );
    const bomb = [
      'a: &a [x, x, x, x, x, x, x, x, x, x]',
      ...'bcdefgh'
        .split('')
        .map((name, index) => `${name}: &${name} [${`*${'abcdefgh'[index]}, `.repeat(10).slice(0, -2)}]`),
    ];
    expect(fileError(() => loadSettingsFile({ text: `${bomb.join('\n')}\n` })).message).toMatch(
      /not valid YAML: Excessive alias count/,
    );
  });
});

describe('findSettingsFile', () => {
  const cwd = join(directory, 'lookup');
  it('--config first, then KVREUSE_CONFIG, then ./kvreuse.yaml when it exists, each against the working directory', () => {
    mkdirSync(cwd);
    expect(findSettingsFile({ option: 'a.yaml', env: { KVREUSE_CONFIG: 'b.yaml' }, cwd })).toEqual({
      path: join(cwd, 'a.yaml'),
      from: 'option',
    });
    expect(findSettingsFile({ env: { KVREUSE_CONFIG: 'b.yaml' }, cwd })).toEqual({
      path: join(cwd, 'b.yaml'),
      from: 'env',
    });
    expect(findSettingsFile({ env: { KVREUSE_CONFIG: '' }, cwd })).toBeUndefined();
    write('lookup/kvreuse.yaml', 'router: {}\n');
    expect(findSettingsFile({ env: {}, cwd })).toEqual({ path: join(cwd, 'kvreuse.yaml'), from: 'cwd' });
  });

  it('refuses an empty --config, naming the flag, where an empty KVREUSE_CONFIG counts as unset', () => {
    const found = () => findSettingsFile({ option: '', env: { KVREUSE_CONFIG: 'b.yaml' }, cwd });
    expect(found).toThrow(ConfigArgumentError);
    expect(found).toThrow(
      'findSettingsFile: locations.option must be a non-empty path (--config names a file) or undefined; got ""',
    );
  });

  it('finds a ./kvreuse.yaml that is a link to nothing, for reading it to say so, rather than running on defaults', () => {
    const linked = join(directory, 'linked');
    mkdirSync(linked);
    symlinkSync(join(directory, 'unmounted.yaml'), join(linked, 'kvreuse.yaml'));
    const found = findSettingsFile({ env: {}, cwd: linked });
    expect(found).toEqual({ path: join(linked, 'kvreuse.yaml'), from: 'cwd' });
    expect(fileError(() => loadSettingsFile(found!.path)).message).toBe(
      `settings file ${join(linked, 'kvreuse.yaml')}: cannot be read: no such file`,
    );
  });
});
