// Every ```ts and ```js snippet of the READMEs runs as written, each in a process of its own: a reader
// who pastes one into a file of a project that installed the packages sees it end with status 0.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runSnippet } from './run-snippet.js';
import { runnableSnippets } from './snippets.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));

describe('README snippets', () => {
  const snippets = runnableSnippets(root);

  it('finds the snippets of every package README', () => {
    const readmes = new Set(snippets.map((snippet) => snippet.path));
    for (const path of ['packages/config/README.md', 'packages/registry/README.md', 'packages/endpoint/README.md']) expect(readmes).toContain(path);
  });

  it.concurrent.each(snippets.map((snippet) => [`${snippet.path}:${snippet.line}`, snippet] as const))('%s runs as written', async (where, snippet) => {
    const run = await runSnippet(snippet);
    expect(run.exit, `${join(root, where)}: the snippet exited with ${run.exit}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`).toBe(0);
  }, 120_000);
});
