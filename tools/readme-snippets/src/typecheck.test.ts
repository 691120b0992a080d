// Type-checks a small page's fragment against the built @kvreuse/endpoint, as the `typecheck` script
// type-checks the real documents' fragments.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fragmentsOf } from './fragments.js';
import { typeErrorsOf } from './typecheck.js';

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

  it('names the fragment that uses a method the API does not have', () => {
    const errors = typeErrorsOf(fragmentsOf('docs/packages/x.md', page('comit')), dir);
    expect(errors.map(({ file, line, message }) => ({ file: basename(file), line, message }))).toEqual([
      {
        file: 'docs-packages-x.md-4.ts',
        line: 4,
        message: "Property 'comit' does not exist on type 'BlockPool'. Did you mean 'commit'?",
      },
    ]);
  });
});
