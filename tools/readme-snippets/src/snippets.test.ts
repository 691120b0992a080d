import { describe, expect, it } from 'vitest';
import { UnclosedFenceError } from './errors.js';
import { codeBlocks } from './snippets.js';

describe('codeBlocks', () => {
  it('gives each fenced block with its language and the line of its opening fence', () => {
    const markdown = ['# title', '', '```ts', 'const a = 1;', '```', 'text', '```sh', 'npm install x', '```', '```', 'plain', '```'].join('\n');
    expect(codeBlocks('README.md', markdown)).toEqual([
      { path: 'README.md', line: 3, language: 'ts', code: 'const a = 1;\n' },
      { path: 'README.md', line: 7, language: 'sh', code: 'npm install x\n' },
      { path: 'README.md', line: 10, language: '', code: 'plain\n' },
    ]);
  });

  it('reads a longer fence as one block, shorter fences inside it included, and strips the fence indent', () => {
    const markdown = ['- item', '  ````js title', '  const s = `', '  ```', '  `;', '  ````'].join('\n');
    expect(codeBlocks('a.md', markdown)).toEqual([{ path: 'a.md', line: 2, language: 'js', code: 'const s = `\n```\n`;\n' }]);
  });

  it('refuses a block that is never closed, naming the file and the line it opens on', () => {
    const markdown = ['intro', '```ts', 'const a = 1;'].join('\n');
    expect(() => codeBlocks('packages/x/README.md', markdown)).toThrow(UnclosedFenceError);
    expect(() => codeBlocks('packages/x/README.md', markdown)).toThrow(expect.objectContaining({ code: 'UNCLOSED_FENCE', path: 'packages/x/README.md', line: 2 }));
  });
});
