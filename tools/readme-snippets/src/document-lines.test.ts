import { describe, expect, it } from 'vitest';
import { blockHeading, contextHeading, documentLineOf } from './document-lines.js';

describe('documentLineOf', () => {
  const program = {
    code: [
      contextHeading('docs/packages/x.md', 7),
      'declare const a: number;',
      blockHeading('docs/packages/x.md', 8),
      'const url = "http://localhost:80";',
      '// see README.md:3',
      'a;',
    ].join('\n'),
    headingLines: [1, 3],
  };

  it('tells a line of the code back from the heading above it: a context from its comment line, a block from the line after its fence', () => {
    expect(documentLineOf(program, 2)).toEqual({ path: 'docs/packages/x.md', line: 7 });
    expect(documentLineOf(program, 4)).toEqual({ path: 'docs/packages/x.md', line: 9 });
    expect(documentLineOf(program, 6)).toEqual({ path: 'docs/packages/x.md', line: 11 });
  });

  it('takes a line of the code that reads as a heading for code, and tells nothing of a line above every heading', () => {
    const withHeadingLikeLine = {
      code: `${program.code}\n${blockHeading('other.md', 40)}\nconst b = 1;`,
      headingLines: program.headingLines,
    };
    expect(documentLineOf(withHeadingLikeLine, 8)).toEqual({ path: 'docs/packages/x.md', line: 13 });
    expect(documentLineOf({ code: `// a comment\n${program.code}`, headingLines: [2, 4] }, 1)).toBeUndefined();
  });
});
