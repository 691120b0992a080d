import { describe, expect, it } from 'vitest';
import { NothingToContinueError, UnclosedFenceError } from './errors.js';
import { codeBlocks, programsOf } from './snippets.js';

describe('codeBlocks', () => {
  it('gives each fenced block with its language and the lines of its opening and closing fences', () => {
    const markdown = [
      '# title',
      '',
      '```ts',
      'const a = 1;',
      '```',
      'text',
      '```sh',
      'npm install x',
      '```',
      '```',
      'plain',
      '```',
    ].join('\n');
    expect(codeBlocks('README.md', markdown)).toEqual([
      { path: 'README.md', line: 3, closingLine: 5, language: 'ts', meta: '', code: 'const a = 1;\n' },
      { path: 'README.md', line: 7, closingLine: 9, language: 'sh', meta: '', code: 'npm install x\n' },
      { path: 'README.md', line: 10, closingLine: 12, language: '', meta: '', code: 'plain\n' },
    ]);
  });

  it('reads a longer fence as one block, shorter fences inside it included, and strips the fence indent', () => {
    const markdown = ['- item', '  ````js title', '  const s = `', '  ```', '  `;', '  ````'].join('\n');
    expect(codeBlocks('a.md', markdown)).toEqual([
      { path: 'a.md', line: 2, closingLine: 6, language: 'js', meta: 'title', code: 'const s = `\n```\n`;\n' },
    ]);
  });

  it('refuses a block that is never closed, naming the file and the line it opens on', () => {
    const markdown = ['intro', '```ts', 'const a = 1;'].join('\n');
    expect(() => codeBlocks('packages/x/README.md', markdown)).toThrow(UnclosedFenceError);
    expect(() => codeBlocks('packages/x/README.md', markdown)).toThrow(
      expect.objectContaining({ code: 'UNCLOSED_FENCE', path: 'packages/x/README.md', line: 2 }),
    );
  });
});

describe('programsOf', () => {
  it('runs ts and js blocks, each alone unless it continues the runnable block before it, each block headed by where it is', () => {
    const markdown = [
      '```ts',
      'const a = 1;',
      '```',
      '```sh',
      'ls',
      '```',
      '```ts continues',
      'console.log(a);',
      '```',
      '```js',
      'console.log(2);',
      '```',
    ].join('\n');
    expect(programsOf('R.md', markdown)).toEqual([
      {
        path: 'R.md',
        lines: [1, 7],
        language: 'ts',
        code: '// R.md:1\nconst a = 1;\n// R.md:7\nconsole.log(a);\n',
        headingLines: [1, 3],
      },
      { path: 'R.md', lines: [10], language: 'js', code: '// R.md:10\nconsole.log(2);\n', headingLines: [1] },
    ]);
  });

  it('leaves out a block marked fragment, an excerpt of what the text around it sets up', () => {
    const markdown = ['```ts fragment', 'store.close();', '```', '```js', 'console.log(1);', '```'].join('\n');
    expect(programsOf('R.md', markdown)).toEqual([
      { path: 'R.md', lines: [4], language: 'js', code: '// R.md:4\nconsole.log(1);\n', headingLines: [1] },
    ]);
  });

  it('goes on from the program it is given when its first block continues one: a page continuing a README', () => {
    const readme = programsOf('packages/x/README.md', ['```ts', 'const a = 1;', '```'].join('\n'));
    const page = ['```ts continues', 'console.log(a);', '```'].join('\n');
    expect(programsOf('docs/packages/x.md', page, readme.at(-1))).toEqual([
      {
        path: 'docs/packages/x.md',
        lines: [1, 1],
        language: 'ts',
        code: '// packages/x/README.md:1\nconst a = 1;\n// docs/packages/x.md:1\nconsole.log(a);\n',
        headingLines: [1, 3],
      },
    ]);
  });

  it('refuses a block that continues nothing, naming the file and its line', () => {
    const markdown = ['```sh', 'ls', '```', '```ts continues', 'console.log(a);', '```'].join('\n');
    expect(() => programsOf('R.md', markdown)).toThrow(NothingToContinueError);
    expect(() => programsOf('R.md', markdown)).toThrow(
      expect.objectContaining({ code: 'NOTHING_TO_CONTINUE', path: 'R.md', line: 4 }),
    );
  });
});
