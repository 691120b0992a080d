import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { UnclosedFenceError } from './errors.js';

/** One fenced code block of a Markdown file. */
export interface CodeBlock {
  /** The file, relative to the repository root. */
  readonly path: string;
  /** The line of its opening fence, from 1. */
  readonly line: number;
  /** The fence's info string up to the first space (`ts`, `sh`, `` for none). */
  readonly language: string;
  readonly code: string;
}

/** Languages whose blocks are programs a reader would run: every such block runs in the tests. */
export const runnableLanguages = new Set(['ts', 'typescript', 'js', 'javascript']);

const fenceOpening = /^(\s{0,3})(`{3,}|~{3,})\s*([^\s`]*)/;

/** Every fenced code block of `markdown` (the file `path`), in order; an unclosed one is an error. */
export function codeBlocks(path: string, markdown: string): CodeBlock[] {
  const lines = markdown.split('\n');
  const blocks: CodeBlock[] = [];
  for (let index = 0; index < lines.length; index++) {
    const opening = fenceOpening.exec(lines[index]!);
    if (opening === null) continue;
    const [, indent, fence, language] = opening as unknown as [string, string, string, string];
    const closing = new RegExp(`^\\s{0,3}${fence[0]}{${fence.length},}\\s*$`);
    const end = lines.findIndex((text, at) => at > index && closing.test(text));
    if (end === -1) throw new UnclosedFenceError(path, index + 1);
    const body = lines.slice(index + 1, end).map((text) => text.replace(new RegExp(`^ {0,${indent.length}}`), ''));
    blocks.push({ path, line: index + 1, language, code: body.join('\n') + '\n' });
    index = end;
  }
  return blocks;
}

/** The READMEs a user reads, relative to the repository root: the repository's and every package's. */
export function readmePaths(root: string): string[] {
  const packages = readdirSync(join(root, 'packages'))
    .filter((dir) => existsSync(join(root, 'packages', dir, 'README.md')))
    .sort()
    .map((dir) => `packages/${dir}/README.md`);
  return ['README.md', ...packages];
}

/** Every block of the READMEs that runs as a program. */
export function runnableSnippets(root: string): CodeBlock[] {
  return readmePaths(root).flatMap((path) =>
    codeBlocks(path, readFileSync(join(root, path), 'utf8')).filter((block) => runnableLanguages.has(block.language)),
  );
}
