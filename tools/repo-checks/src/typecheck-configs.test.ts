import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { checkTypecheckConfigs } from './typecheck-configs.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('checkTypecheckConfigs', () => {
  it("finds every project of the repository typechecked against its dependencies' declarations", () => {
    expect(checkTypecheckConfigs(repoRoot)).toEqual([]);
  });

  it('names a missing reference and included sources', () => {
    const copy = mkdtempSync(join(tmpdir(), 'kvreuse-typecheck-configs-'));
    try {
      for (const project of ['packages/errors', 'packages/config', 'packages/descriptors', 'tools/demo']) {
        cpSync(join(repoRoot, project), join(copy, project), {
          recursive: true,
          filter: (src) => !src.includes('node_modules') && !src.includes('/dist'),
        });
      }
      const configPath = join(copy, 'packages/descriptors/tsconfig.json');
      const config = JSON.parse(readFileSync(configPath, 'utf8'));
      config.include = ['src/**/*.ts', 'test/**/*.ts'];
      config.references = [{ path: './tsconfig.build.json' }];
      writeFileSync(configPath, JSON.stringify(config));
      const messages = checkTypecheckConfigs(copy).map((p) => `${p.project}: ${p.message}`);
      expect(messages).toEqual([
        expect.stringMatching(
          /^packages\/descriptors: tsconfig\.json references \[\.\/tsconfig\.build\.json\] but must reference \[\.\.\/config\/tsconfig\.build\.json, \.\.\/errors\/tsconfig\.build\.json, \.\/tsconfig\.build\.json\]/,
        ),
        'packages/descriptors: tsconfig.json includes "src/**/*.ts": the package\'s own build checks its sources; the typecheck includes only its tests (src/**/*.test.ts)',
        // tools/demo depends on packages the copy does not have: only those it has are expected.
        expect.stringMatching(
          /^tools\/demo: tsconfig\.json references \[.*\] but must reference \[\.\.\/\.\.\/packages\/config\/tsconfig\.build\.json, \.\.\/\.\.\/packages\/descriptors\/tsconfig\.build\.json\]/,
        ),
      ]);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
