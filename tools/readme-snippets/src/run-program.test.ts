import { describe, expect, it } from 'vitest';
import { runProgram } from './run-program.js';

describe('runProgram', () => {
  it('runs a ts program with its types stripped, the packages imported by their names, in a folder of its own, without KVREUSE_* variables', async () => {
    const code = [
      "import { writeFileSync } from 'node:fs';",
      "import { describeValue } from '@kvreuse/errors';",
      'const value: number = Number.NaN;',
      "writeFileSync('left-behind.txt', 'x');",
      "console.log(describeValue(value), process.cwd().includes('.snippets'), process.env['KVREUSE_TRANSPORT_LIBRARY']);",
    ].join('\n');
    const inherited = process.env['KVREUSE_TRANSPORT_LIBRARY'];
    process.env['KVREUSE_TRANSPORT_LIBRARY'] = '/a/library/of/the/test/run.so';
    const run = await runProgram({ path: 'R.md', lines: [3], language: 'ts', code, headingLines: [] }).finally(() => {
      if (inherited === undefined) delete process.env['KVREUSE_TRANSPORT_LIBRARY'];
      else process.env['KVREUSE_TRANSPORT_LIBRARY'] = inherited;
    });
    expect(run).toEqual({ exit: 0, stdout: 'NaN true undefined\n', stderr: '' });
  });

  it('reports a program that throws by its exit status and what it printed', async () => {
    const run = await runProgram({
      path: 'R.md',
      lines: [9],
      language: 'js',
      code: "console.log('before');\nthrow new Error('the snippet broke');\n",
      headingLines: [],
    });
    expect(run.exit).toBe(1);
    expect(run.stdout).toBe('before\n');
    expect(run.stderr).toContain('Error: the snippet broke');
  });
});
