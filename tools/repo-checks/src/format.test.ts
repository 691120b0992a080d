import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { writeTree } from './fixture-tree.js';
import { checkFormat, formattedFiles } from './format.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('the repository', () => {
  // A hang guard, not a speed check: Prettier reads and formats some 600 files, on a shared machine.
  it('is formatted as prettier.config.mjs says (pnpm format writes it)', { timeout: 300_000 }, async () => {
    expect((await checkFormat(repoRoot)).map((problem) => problem.message)).toEqual([]);
  });

  it('formats the TypeScript, JavaScript and JSON, but not Markdown, YAML, generated files, builds or byte-exact fixtures', async () => {
    const files = await formattedFiles(repoRoot);
    expect(files).toEqual(
      expect.arrayContaining([
        'prettier.config.mjs',
        'package.json',
        'tools/repo-checks/src/format.ts',
        'scripts/dev.mjs',
        'tsconfig.base.json',
      ]),
    );
    const left = [
      'README.md',
      'pnpm-lock.yaml',
      'packages/config/schema/settings.schema.json',
      'tools/repo-checks/fixtures/test-report/syntax-error.test.mjs',
    ];
    expect(
      files.filter(
        (file) => left.includes(file) || /^docs\/api\/|(^|\/)(dist|node_modules)\/|\.(md|ya?ml)$/.test(file),
      ),
    ).toEqual([]);
  });
});

describe('checkFormat', () => {
  let remove = (): void => {};
  afterEach(() => remove());

  it('names each file Prettier would change or cannot parse, and leaves out what .gitignore and .prettierignore ignore', async () => {
    const made = writeTree(
      {
        '.prettierrc.json': '{ "singleQuote": true }\n',
        '.gitignore': 'dist/\n',
        '.prettierignore': '*.md\nfixtures/\n',
        'src/good.ts': "export const good = 'yes';\n",
        'src/bad.ts': 'export const bad = "no"\n',
        'src/broken.ts': 'export const = ;\n',
        'data.json': '{"a":1}\n',
        'README.md': '*   not   formatted\n',
        'dist/built.js': 'export const built = "no"\n',
        'fixtures/as-is.ts': 'export const asIs = "no"\n',
        'node_modules/dep/index.js': 'export const dep = "no"\n',
      },
      'kvreuse-format-',
    );
    remove = made.remove;
    expect(await formattedFiles(made.root)).toEqual([
      '.prettierrc.json',
      'data.json',
      'src/bad.ts',
      'src/broken.ts',
      'src/good.ts',
    ]);
    const problems = await checkFormat(made.root);
    expect(problems.map((problem) => [problem.file, problem.rule])).toEqual([
      ['data.json', 'unformatted'],
      ['src/bad.ts', 'unformatted'],
      ['src/broken.ts', 'unparsable'],
    ]);
    expect(problems[1]?.message).toBe('src/bad.ts is not formatted: run `pnpm format`');
    expect(problems[2]?.message).toMatch(/^src\/broken\.ts cannot be formatted: /);
  });
});
