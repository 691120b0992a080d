// Every ```ts and ```js snippet of the READMEs and of the package reference pages (docs/packages; not
// those marked `fragment`, which the `typecheck` script type-checks) runs as written, each program (a
// snippet, or a chain of snippets that continue one another) in a process of its own: a reader who
// pastes it into a file of a project that installed the packages sees it end with status 0.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { documentFragments } from './fragments.js';
import { runProgram } from './run-program.js';
import { runnablePrograms } from './snippets.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));

describe('README snippets', () => {
  const programs = runnablePrograms(root);

  it('finds the snippets of every package README and of the reference pages', () => {
    const readmes = new Set(programs.map((program) => program.path));
    for (const path of [
      'packages/config/README.md',
      'packages/registry/README.md',
      'packages/endpoint/README.md',
      'docs/packages/config.md',
      'docs/packages/descriptors.md',
    ])
      expect(readmes).toContain(path);
  });

  it('finds every ts fragment of the reference pages with the context it states', () => {
    const pages = new Set(documentFragments(root).map((fragment) => fragment.path));
    for (const path of ['docs/packages/config.md', 'docs/packages/discovery.md', 'docs/packages/registry.md'])
      expect(pages).toContain(path);
  });

  it.concurrent.each(programs.map((program) => [`${program.path}:${program.lines.join(',')}`, program] as const))(
    '%s runs as written',
    async (where, program) => {
      const run = await runProgram(program);
      expect(
        run.exit,
        `${join(root, where)}: the snippet exited with ${run.exit}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`,
      ).toBe(0);
    },
    120_000,
  );
});
