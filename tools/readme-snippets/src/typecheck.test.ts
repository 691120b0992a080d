// Type-checks a small page's fragment against the built @kvreuse/endpoint, as the `typecheck` script
// type-checks the real documents' fragments.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fragmentsOf } from './fragments.js';
import { programsOf } from './snippets.js';
import { typeErrorLine, typeErrorsOf } from './typecheck.js';

const scratchDir = fileURLToPath(new URL('../.snippets', import.meta.url));

/** A reference page whose one fragment commits a block to a `BlockPool` through `method`. */
function page(method: string): string {
  return [
    'The source retains a block:',
    '',
    "<!-- fragment-context: import type { BlockPool } from '@kvreuse/endpoint'; declare const pool: BlockPool; -->",
    '```ts fragment',
    `pool.${method}(pool.allocate(), 11n);`,
    '```',
  ].join('\n');
}

describe('typeErrorsOf, on a fragment with its context', () => {
  let dir: string;
  beforeEach(() => {
    mkdirSync(scratchDir, { recursive: true });
    dir = mkdtempSync(join(scratchDir, 'fragment-check-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('finds nothing wrong with a fragment that uses the API as it is', () => {
    expect(typeErrorsOf(fragmentsOf('docs/packages/x.md', page('commit')), dir)).toEqual([]);
  });

  it('names the document line of a fragment that uses a method the API does not have', () => {
    expect(typeErrorsOf(fragmentsOf('docs/packages/x.md', page('comit')), dir)).toEqual([
      {
        path: 'docs/packages/x.md',
        line: 5,
        message: "Property 'comit' does not exist on type 'BlockPool'. Did you mean 'commit'?",
      },
    ]);
  });

  it('names the document line of an error in a context that spans lines', () => {
    const markdown = [
      '<!-- fragment-context:',
      "import type { BlockPool } from '@kvreuse/endpoint';",
      'declare const pool: BlockPol;',
      '-->',
      '```ts fragment',
      'pool;',
      '```',
    ].join('\n');
    expect(typeErrorsOf(fragmentsOf('docs/packages/x.md', markdown), dir)).toEqual([
      { path: 'docs/packages/x.md', line: 3, message: "Cannot find name 'BlockPol'. Did you mean 'BlockPool'?" },
    ]);
  });

  it('names the document line of an error below a line of the block that reads as a heading', () => {
    const page = ['```ts', '// other.md:40', 'const name: string = 1;', '```'].join('\n');
    expect(typeErrorsOf(programsOf('docs/packages/x.md', page), dir)).toEqual([
      { path: 'docs/packages/x.md', line: 3, message: "Type 'number' is not assignable to type 'string'." },
    ]);
  });

  it('names the document and line of the block an error is in, in a program a page continues from its README', () => {
    const readme = programsOf('packages/x/README.md', ['```ts', 'const blocks = 1;', '```'].join('\n'));
    const page = ['Then:', '', '```ts continues', 'const name: string = blocks;', '```'].join('\n');
    expect(typeErrorsOf(programsOf('docs/packages/x.md', page, readme.at(-1)), dir)).toEqual([
      { path: 'docs/packages/x.md', line: 4, message: "Type 'number' is not assignable to type 'string'." },
    ]);
  });
});

describe('typeErrorLine', () => {
  it('names the document by its absolute path, and gives an error of no file as its message alone', () => {
    const message = "Type 'number' is not assignable to type 'string'.";
    expect(typeErrorLine('/repo', { path: 'docs/packages/x.md', line: 3, message })).toBe(
      `/repo/docs/packages/x.md:3: ${message}`,
    );
    expect(typeErrorLine('/repo', { path: '/repo/tools/x/a.ts', line: 2, message })).toBe(
      `/repo/tools/x/a.ts:2: ${message}`,
    );
    expect(typeErrorLine('/repo', { path: '', line: 0, message: 'No inputs were found' })).toBe('No inputs were found');
  });
});
