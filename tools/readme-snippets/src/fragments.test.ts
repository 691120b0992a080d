import { describe, expect, it } from 'vitest';
import { MissingFragmentContextError, StrayFragmentContextError } from './errors.js';
import { fragmentsOf } from './fragments.js';

describe('fragmentsOf', () => {
  it('makes each ts fragment a module of its stated context, then the fragment, each headed by where it is', () => {
    const markdown = [
      'text',
      '<!-- fragment-context: declare const store: { close(): Promise<void> }; -->',
      '```ts fragment',
      'await store.close();',
      '```',
      '```ts',
      'console.log(1);',
      '```',
    ].join('\n');
    expect(fragmentsOf('R.md', markdown)).toEqual([
      {
        path: 'R.md',
        lines: [3],
        language: 'ts',
        code:
          '// R.md:2 (fragment-context)\ndeclare const store: { close(): Promise<void> };\n' +
          '// R.md:3\nawait store.close();\nexport {};\n',
        headingLines: [1, 3],
      },
    ]);
  });

  it('reads a context that spans lines, each on its line of the module', () => {
    const markdown = [
      '<!-- fragment-context:',
      "import type { Agent } from '@kvreuse/native-bindings';",
      'declare const agent: Agent;',
      '-->',
      '```ts fragment',
      'await agent.close();',
      '```',
    ].join('\n');
    expect(fragmentsOf('R.md', markdown)[0]).toMatchObject({
      code:
        "// R.md:1 (fragment-context)\n\nimport type { Agent } from '@kvreuse/native-bindings';\ndeclare const agent: Agent;\n" +
        '// R.md:5\nawait agent.close();\nexport {};\n',
      headingLines: [1, 5],
    });
  });

  it('reads only the context comments outside code blocks: one inside a fence is an example, not a context', () => {
    const markdown = [
      'State the context of a fragment so:',
      '````md',
      '<!-- fragment-context: declare const shown: number; -->',
      '```ts fragment',
      'shown;',
      '```',
      '````',
      '<!-- fragment-context: declare const real: number; -->',
      '```ts fragment',
      'real;',
      '```',
    ].join('\n');
    expect(fragmentsOf('R.md', markdown)).toEqual([
      {
        path: 'R.md',
        lines: [9],
        language: 'ts',
        code: '// R.md:8 (fragment-context)\ndeclare const real: number;\n// R.md:9\nreal;\nexport {};\n',
        headingLines: [1, 3],
      },
    ]);
  });

  it('refuses a ts fragment without a context on the line before it, naming the file and its line', () => {
    const markdown = ['<!-- fragment-context: declare const a: number; -->', '', '```ts fragment', 'a;', '```'].join(
      '\n',
    );
    expect(() => fragmentsOf('R.md', markdown)).toThrow(MissingFragmentContextError);
    expect(() => fragmentsOf('R.md', markdown)).toThrow(
      expect.objectContaining({ code: 'MISSING_FRAGMENT_CONTEXT', path: 'R.md', line: 3 }),
    );
  });

  it('refuses a context that no ts fragment follows, or that is never closed, naming the line it opens on', () => {
    const beforeARunnableBlock = ['x', '<!-- fragment-context: declare const a: number; -->', '```ts', 'a;', '```'];
    expect(() => fragmentsOf('R.md', beforeARunnableBlock.join('\n'))).toThrow(StrayFragmentContextError);
    expect(() => fragmentsOf('R.md', beforeARunnableBlock.join('\n'))).toThrow(
      expect.objectContaining({ code: 'STRAY_FRAGMENT_CONTEXT', path: 'R.md', line: 2 }),
    );
    const unclosed = ['<!-- fragment-context: declare const a: number;', '```ts fragment', 'a;', '```'];
    expect(() => fragmentsOf('R.md', unclosed.join('\n'))).toThrow(
      expect.objectContaining({ code: 'STRAY_FRAGMENT_CONTEXT', path: 'R.md', line: 1 }),
    );
  });

  it("refuses a context never closed at its line, not taking a later block's or context's --> for its end", () => {
    const unclosed = [
      'x',
      '<!-- fragment-context: declare const a: number;',
      '```ts fragment',
      'a;',
      '```',
      'State the context of a fragment so:',
      '```md',
      '<!-- fragment-context: declare const shown: number; -->',
      '```',
    ];
    const beforeAnotherContext = [
      '<!-- fragment-context: declare const a: number;',
      'y',
      '<!-- fragment-context: declare const b: number; -->',
      '```ts fragment',
      'b;',
      '```',
    ];
    for (const markdown of [unclosed, beforeAnotherContext]) {
      const opening = markdown.findIndex((line) => line.startsWith('<!--')) + 1;
      expect(() => fragmentsOf('R.md', markdown.join('\n'))).toThrow(
        expect.objectContaining({
          name: 'StrayFragmentContextError',
          code: 'STRAY_FRAGMENT_CONTEXT',
          path: 'R.md',
          line: opening,
        }),
      );
    }
  });
});
