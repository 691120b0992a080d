import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const typedocBin = join(repoRoot, 'node_modules/typedoc/bin/typedoc');
const committed = join(repoRoot, 'docs/api');
const scratch = mkdtempSync(join(tmpdir(), 'kvreuse-api-docs-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

describe('docs/api', () => {
  it('is what `pnpm docs:api` generates from the packages’ public entry points today', () => {
    const result = spawnSync(
      process.execPath,
      [typedocBin, '--options', 'typedoc.json', '--out', scratch, '--treatWarningsAsErrors'],
      {
        cwd: repoRoot,
        encoding: 'utf8',
      },
    );
    expect(result.status, `typedoc failed:\n${result.stdout}${result.stderr}`).toBe(0);
    const generated = filesUnder(scratch);
    expect(filesUnder(committed), 'docs/api is stale: run `pnpm docs:api`').toEqual(generated);
    for (const file of generated) {
      expect(readFileSync(join(committed, file), 'utf8'), `docs/api/${file} is stale: run \`pnpm docs:api\``).toBe(
        readFileSync(join(scratch, file), 'utf8'),
      );
    }
  }, 180_000); // typedoc type-checks every package once: 20 s of CPU, more on a loaded machine
});
