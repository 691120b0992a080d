import { describe, expect, it } from 'vitest';
import { blockHeading, contextHeading, documentLineOf } from './document-lines.js';

describe('documentLineOf', () => {
  const code = [
    contextHeading('docs/packages/x.md', 7),
    'declare const a: number;',
    blockHeading('docs/packages/x.md', 8),
    'const url = "http://localhost:80";',
    '// see README.md:3',
    'a;',
  ].join('\n');

  it('tells a line of the code back from the heading above it: a context from its comment line, a block from the line after its fence', () => {
    expect(documentLineOf(code, 2)).toEqual({ path: 'docs/packages/x.md', line: 7 });
    expect(documentLineOf(code, 4)).toEqual({ path: 'docs/packages/x.md', line: 9 });
    expect(documentLineOf(code, 6)).toEqual({ path: 'docs/packages/x.md', line: 11 });
  });

  it('takes no comment of the code itself for a heading, and tells nothing of a line above every heading', () => {
    expect(documentLineOf(`${code}\nconst b = 1;`, 7)).toEqual({ path: 'docs/packages/x.md', line: 12 });
    expect(documentLineOf(`// a comment\n${code}`, 1)).toBeUndefined();
  });
});
