import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { lines, writeTree } from './fixture-tree.js';
import { checkSizes, maxFileLines, maxFunctionLines } from './sizes.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('the repository', () => {
  it(`keeps every source file to ${maxFileLines} lines and every function to ${maxFunctionLines}`, () => {
    expect(
      checkSizes(repoRoot)
        .filter((violation) => !violation.test)
        .map((violation) => violation.message),
    ).toEqual([]);
  });

  it(`keeps every test file to ${maxFileLines} lines and every test function to ${maxFunctionLines}`, () => {
    expect(
      checkSizes(repoRoot)
        .filter((violation) => violation.test)
        .map((violation) => violation.message),
    ).toEqual([]);
  });
});

describe('checkSizes', () => {
  let remove = (): void => {};
  afterEach(() => remove());

  function tree(files: Record<string, string>): string {
    const made = writeTree(files, 'kvreuse-sizes-');
    remove = made.remove;
    return made.root;
  }

  it(`refuses a file of ${maxFileLines + 1} lines and a function of ${maxFunctionLines + 1}, in TypeScript and in C, and takes them one line shorter`, () => {
    const root = tree({
      'packages/a/src/fits.ts': lines(maxFileLines),
      'packages/a/src/long.ts': lines(maxFileLines + 1),
      'packages/a/src/functions.ts': `export function fits(): void {\n${lines(maxFunctionLines - 2)}}\nexport function long(): void {\n${lines(maxFunctionLines - 1)}}\n`,
      'native/src/fits.c': lines(maxFileLines, '/* line ').replace(/\n/g, ' */\n'),
      'native/include/long.h': lines(maxFileLines + 1, '/* line ').replace(/\n/g, ' */\n'),
      'native/src/functions.c': `void fits(void) {\n${lines(maxFunctionLines - 2)}}\n\nvoid long_one(void) {\n${lines(maxFunctionLines - 1)}}\n`,
    });
    expect(checkSizes(root).map((violation) => violation.message)).toEqual([
      'packages/a/src/functions.ts:81: long is 81 lines long (at most 80)',
      'packages/a/src/long.ts is 801 lines long (at most 800)',
      'native/src/functions.c:82: long_one is 81 lines long (at most 80)',
      'native/include/long.h is 801 lines long (at most 800)',
    ]);
  });

  it('measures every kind of TypeScript function from the first line of its declaration to its last, its documentation aside, and names it', () => {
    const root = tree({
      'packages/a/src/kinds.ts': [
        '/**',
        ' * Documentation does not count.',
        ' */',
        'export function declared(',
        '  a: number,',
        '): number {',
        '  return a;',
        '}',
        'export const arrow = (): void => {',
        '  void 0;',
        '};',
        'export class Box {',
        '  constructor() {',
        '    void 0;',
        '  }',
        '  get size(): number {',
        '    return 1;',
        '  }',
        '  set size(value: number) {',
        '    void value;',
        '  }',
        '  private method(): void {',
        '    void 0;',
        '  }',
        '  field = () => {',
        '    void 0;',
        '  };',
        '}',
        'export const table = {',
        '  entry: function named() {',
        '    return 1;',
        '  },',
        '  shorthand() {',
        '    return 2;',
        '  },',
        '};',
        'setTimeout(() => {',
        '  void 0;',
        '}, 1);',
        'export function short(): number { return 1; }',
        '',
      ].join('\n'),
    });
    expect(
      checkSizes(root, { functionLines: 2 }).map((violation) => [violation.function, violation.line, violation.lines]),
    ).toEqual([
      ['declared', 4, 5],
      ['arrow', 9, 3],
      ['Box.constructor', 13, 3],
      ['get Box.size', 16, 3],
      ['set Box.size', 19, 3],
      ['Box.method', 22, 3],
      ['Box.field', 25, 3],
      ['named', 30, 3],
      ['shorthand', 33, 3],
      ['callback of setTimeout(…)', 37, 3],
    ]);
  });

  it('tells test files from sources, measures tests but not the suites that group them, and leaves out what is not a source', () => {
    const test =
      "import { describe, it } from 'vitest';\ndescribe('a suite', () => {\n  it('a long test', () => {\n    void 0;\n  });\n});\n";
    const long = 'export function long(): void {\n  void 0;\n}\n';
    const root = tree({
      'packages/a/src/a.test.ts': test,
      'packages/a/test/helper.ts': long,
      'packages/a/src/a.ts': long,
      'tools/t/src/main.ts': long,
      'scripts/run.mjs': 'function main() {\n  return 0;\n}\nmain();\n',
      'native/test/test_a.c': 'int main(void) {\n    return 0;\n}\n',
      'native/fuzz/fuzz_a.c': 'int LLVMFuzzerTestOneInput(void) {\n    return 0;\n}\n',
      // Not measured: benchmarks, builds, dependencies and declarations.
      'packages/a/bench/long.ts': long,
      'packages/a/dist/a.js': long,
      'packages/a/src/node_modules/x/index.js': long,
      'packages/a/src/types.d.ts': long,
    });
    expect(
      checkSizes(root, { functionLines: 2 }).map((violation) => [violation.file, violation.function, violation.test]),
    ).toEqual([
      ['packages/a/src/a.test.ts', "callback of it('a long test')", true],
      ['packages/a/src/a.ts', 'long', false],
      ['packages/a/test/helper.ts', 'long', true],
      ['tools/t/src/main.ts', 'long', false],
      ['scripts/run.mjs', 'main', false],
      ['native/test/test_a.c', 'main', true],
      ['native/fuzz/fuzz_a.c', 'LLVMFuzzerTestOneInput', true],
    ]);
  });

  it('finds the C functions at file scope: braces in comments, strings, characters and macros aside, a return type on its own line counted, structs and initializers left out', () => {
    const root = tree({
      'native/src/scan.c': [
        '/* A brace { in a comment is not code. */',
        '#include "scan.h"',
        '#define BLOCK { 1, 2 }',
        '',
        'struct pair {',
        '    int a;',
        '};',
        '',
        'static const int table[] = {',
        '    1,',
        '};',
        '',
        'static int',
        'returns_on_its_own_line(void)',
        '{',
        '    const char *s = "}";',
        "    char c = '{';",
        '    return s[0] + c;',
        '}',
        '',
        'CASES(DEFINE_CASE)',
        '',
        'int after_a_macro(int x) {',
        '    if (x) {',
        '        return 1; // }',
        '    }',
        '    return 0;',
        '}',
        '',
      ].join('\n'),
    });
    expect(
      checkSizes(root, { functionLines: 2 }).map((violation) => [violation.function, violation.line, violation.lines]),
    ).toEqual([
      ['returns_on_its_own_line', 13, 7],
      ['after_a_macro', 23, 6],
    ]);
  });
});
