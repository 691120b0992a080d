// Two installed copies of @kvreuse/config in one process (an application and a library that pinned
// another copy): errors of either are recognised by the other through their code and brand, where
// `instanceof` cannot. The second copy is the built package copied to a directory of its own.
import { cpSync, existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as here from '../src/index.js';
import { sampleGroups } from './sample-groups.js';
import { temporaryDirectory } from './temporary-directory.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const { path: copies } = temporaryDirectory('kvreuse-config-copy-');

/** Copies a built workspace package as npm would install it: its files, and the manifest's published exports. */
function installPackage(sourceDir: string, destination: string, parts: readonly string[]): void {
  for (const part of parts) cpSync(join(sourceDir, part), join(destination, part), { recursive: true });
  const manifest = JSON.parse(readFileSync(join(sourceDir, 'package.json'), 'utf8')) as {
    exports: unknown;
    publishConfig: { exports: unknown };
  };
  writeFileSync(
    join(destination, 'package.json'),
    JSON.stringify({ ...manifest, exports: manifest.publishConfig.exports }),
  );
}

async function installedCopy(): Promise<typeof here> {
  const built = join(packageDir, 'dist', 'index.js');
  if (!existsSync(built)) throw new Error(`${built} is missing: build the package first (pnpm exec turbo run build)`);
  const modules = join(copies, 'node_modules');
  const copy = join(modules, '@kvreuse', 'config');
  installPackage(packageDir, copy, ['dist']);
  installPackage(join(packageDir, '..', 'errors'), join(modules, '@kvreuse', 'errors'), ['dist']);
  // Its other dependencies (zod, yaml) resolve through the package's own node_modules.
  for (const name of ['zod', 'yaml']) symlinkSync(join(packageDir, 'node_modules', name), join(modules, name), 'dir');
  return (await import(pathToFileURL(join(copy, 'dist', 'index.js')).href)) as typeof here;
}

function caught(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}

describe('errors across two installed copies', () => {
  it('are recognised by isConfigError and isSettingsError of the other copy, by code, not by class', async () => {
    const there = await installedCopy();
    const thereGroups = sampleGroups(there.defineGroup);
    const thereSettings = there.defineSettings(Object.values(thereGroups));
    const hereSettings = here.defineSettings(Object.values(sampleGroups(here.defineGroup)));
    expect(there.UnknownSettingError).not.toBe(here.UnknownSettingError);

    const errors = [
      caught(() => thereSettings.resolve({ argv: ['--router-minimum-transfer-prefix-block=8'] })),
      caught(() => thereSettings.resolve({ env: { KVREUSE_TRANSPORT_BACKEND: 'tcp' } })),
      caught(() => thereSettings.resolve({ file: { text: 'router: [1\n' } })),
      caught(() => thereSettings.resolve({ args: [] } as never)),
      caught(() => there.defineGroup('No', {} as never)),
      caught(() => there.defineSettings([])),
    ];
    expect(errors.map((error) => (error as { code: string }).code)).toEqual([
      'UNKNOWN_SETTING',
      'INVALID_SETTING',
      'SETTINGS_FILE',
      'INVALID_RESOLVE_OPTIONS',
      'INVALID_GROUP',
      'INVALID_COMPOSITION',
    ]);
    for (const error of errors) {
      expect(error).not.toBeInstanceOf(here.UnknownSettingError);
      expect(here.isConfigError(error)).toBe(true);
      expect(there.isConfigError(error)).toBe(true);
    }
    expect(errors.map((error) => here.isSettingsError(error))).toEqual([true, true, true, false, false, false]);

    // The other way round, and a safeResolve of one copy composing a group of the other.
    expect(there.isConfigError(caught(() => hereSettings.resolve({ file: 42 as never })))).toBe(true);
    const mixed = here.defineSettings([thereGroups.routerGroup]);
    const result = mixed.safeResolve({ env: { KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS: 'four' } });
    expect(result.success).toBe(false);
    if (!result.success) expect(there.isSettingsError(result.error)).toBe(true);

    // Look-alikes are not errors of the package.
    for (const lookalike of [
      new Error('x'),
      { code: 'UNKNOWN_SETTING' },
      { [Symbol.for('@kvreuse/config/error')]: true, code: 'ELSEWHERE' },
      null,
      'UNKNOWN_SETTING',
    ]) {
      expect(here.isConfigError(lookalike)).toBe(false);
    }
  });
});
