import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { checkLayering } from './layering.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('the repository', () => {
  it('respects its layers: each package imports only the layers below it', () => {
    expect(checkLayering(repoRoot)).toEqual([]);
  });
});

describe('checkLayering', () => {
  let fixture: string;
  afterEach(() => rmSync(fixture, { recursive: true, force: true }));

  function writeTree(files: Record<string, string | object>): string {
    fixture = mkdtempSync(join(tmpdir(), 'kvreuse-layering-'));
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(fixture, path)), { recursive: true });
      writeFileSync(join(fixture, path), typeof content === 'string' ? content : JSON.stringify(content));
    }
    return fixture;
  }

  const rootManifest = { name: 'root', devDependencies: { vitest: '4.1.12' } };

  it('accepts downward imports through entry points, node built-ins and declared packages', () => {
    const root = writeTree({
      'package.json': rootManifest,
      'packages/config/package.json': { name: '@kvreuse/config', dependencies: { zod: '4.6.7' } },
      'packages/config/src/index.ts':
        "import { z } from 'zod';\nimport { readFileSync } from 'node:fs';\nimport { parse } from './parse.js';\nexport { z, readFileSync, parse };\n",
      'packages/descriptors/package.json': {
        name: '@kvreuse/descriptors',
        dependencies: { '@kvreuse/config': 'workspace:^' },
      },
      'packages/descriptors/src/index.ts':
        "import type { Settings } from '@kvreuse/config';\nexport type { Settings };\n",
      'packages/descriptors/src/index.test.ts': "import { it } from 'vitest';\nit('works', () => {});\n",
      'packages/descriptors/bench/plan.ts': "import { plan } from '@kvreuse/descriptors';\nplan();\n",
    });
    expect(checkLayering(root)).toEqual([]);
  });

  it('refuses an import of a layer above or of itself from shipped code, a deep import, an escaping relative path and an undeclared package', () => {
    const root = writeTree({
      'package.json': rootManifest,
      'packages/config/package.json': { name: '@kvreuse/config', devDependencies: { yaml: '2.9.1' } },
      'packages/config/src/index.ts': [
        "import { planTransfer } from '@kvreuse/descriptors';",
        "import { parse } from 'yaml';",
        "const later = await import('../../descriptors/src/plan.js');",
        'export { planTransfer, parse, later };',
      ].join('\n'),
      'packages/descriptors/package.json': {
        name: '@kvreuse/descriptors',
        dependencies: { '@kvreuse/config': 'workspace:^' },
      },
      'packages/descriptors/src/index.ts': "export { catalog } from '@kvreuse/config/src/catalog.js';\n",
      'packages/descriptors/src/plan.ts': "export { layout } from '@kvreuse/descriptors';\n",
    });
    const found = checkLayering(root).map((v) => [v.packageDir, v.file, v.rule, v.specifier]);
    expect(found).toEqual([
      ['config', 'src/index.ts', 'upward-import', '@kvreuse/descriptors'],
      ['config', 'src/index.ts', 'undeclared-import', 'yaml'],
      ['config', 'src/index.ts', 'relative-escape', '../../descriptors/src/plan.js'],
      ['descriptors', 'src/index.ts', 'deep-import', '@kvreuse/config/src/catalog.js'],
      ['descriptors', 'src/plan.ts', 'upward-import', '@kvreuse/descriptors'],
    ]);
  });

  it('holds the examples to the entry points and their own dependencies, their tests also to the root devDependencies', () => {
    const root = writeTree({
      'package.json': rootManifest,
      'packages/config/package.json': { name: '@kvreuse/config' },
      'packages/cli/package.json': { name: '@kvreuse/cli' },
      'examples/package.json': {
        name: 'examples',
        dependencies: { '@kvreuse/config': 'workspace:^', '@kvreuse/cli': 'workspace:^' },
      },
      'examples/serve.mjs':
        "import { defaultSettings } from '@kvreuse/config';\nimport { run } from '@kvreuse/cli';\nimport { shared } from './shared.mjs';\n",
      'examples/deep.mjs':
        "import { catalog } from '@kvreuse/config/src/catalog.js';\nimport { it } from 'vitest';\nimport { plan } from '../packages/config/src/plan.js';\n",
      'examples/test/run.test.ts': "import { it } from 'vitest';\nimport { defaultSettings } from '@kvreuse/config';\n",
    });
    const found = checkLayering(root);
    expect(found.map((v) => [v.packageDir, v.file, v.rule, v.specifier])).toEqual([
      ['examples', 'deep.mjs', 'deep-import', '@kvreuse/config/src/catalog.js'],
      ['examples', 'deep.mjs', 'undeclared-import', 'vitest'],
      ['examples', 'deep.mjs', 'relative-escape', '../packages/config/src/plan.js'],
    ]);
    expect(found[2]?.message).toBe(
      'deep.mjs reaches out of examples to packages/config/src/plan.js: import another package by its name',
    );
  });

  it('refuses a dependency on a layer above and a package that is not a layer', () => {
    const root = writeTree({
      'package.json': rootManifest,
      'packages/config/package.json': { name: '@kvreuse/config', dependencies: { '@kvreuse/registry': 'workspace:^' } },
      'packages/gadgets/package.json': { name: '@kvreuse/gadgets' },
    });
    const found = checkLayering(root);
    expect(found.map((v) => [v.packageDir, v.rule, v.specifier])).toEqual([
      ['config', 'upward-dependency', '@kvreuse/registry'],
      ['gadgets', 'unknown-layer', 'gadgets'],
    ]);
    expect(found[1]?.message).toContain('tools/repo-checks/src/layers.ts');
  });

  it('lets a layer list a private test-support package of tools/ that stands below it, and refuses one that depends on the layer or above', () => {
    const root = writeTree({
      'package.json': rootManifest,
      'tools/test-support/package.json': {
        name: '@kvreuse-internal/test-support',
        private: true,
        dependencies: { '@kvreuse/descriptors': 'workspace:^' },
      },
      'tools/test-support/src/index.ts': "export { planTransfer } from '@kvreuse/descriptors';\n",
      'tools/registry-support/package.json': {
        name: '@kvreuse-internal/registry-support',
        private: true,
        dependencies: { '@kvreuse/registry': 'workspace:^' },
      },
      'packages/descriptors/package.json': { name: '@kvreuse/descriptors' },
      'packages/discovery/package.json': {
        name: '@kvreuse/discovery',
        dependencies: { '@kvreuse/descriptors': 'workspace:^' },
        devDependencies: {
          '@kvreuse-internal/test-support': 'workspace:^',
          '@kvreuse-internal/registry-support': 'workspace:^',
        },
      },
      'packages/discovery/test/store.test.ts':
        "import { planTransfer } from '@kvreuse-internal/test-support';\nexport { planTransfer };\n",
      'packages/registry/package.json': {
        name: '@kvreuse/registry',
        devDependencies: { '@kvreuse-internal/registry-support': 'workspace:^' },
      },
    });
    const found = checkLayering(root);
    expect(found.map((v) => [v.packageDir, v.rule, v.specifier])).toEqual([
      ['discovery', 'upward-dependency', '@kvreuse-internal/registry-support'],
      ['registry', 'upward-dependency', '@kvreuse-internal/registry-support'],
    ]);
    expect(found[0]?.message).toBe(
      '@kvreuse/discovery (layer 3) lists @kvreuse-internal/registry-support in devDependencies, which depends on @kvreuse/registry, not a layer below @kvreuse/discovery',
    );
  });
});
