import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { NothingToContinueError, UnclosedFenceError } from './errors.js';

/** One fenced code block of a Markdown file. */
export interface CodeBlock {
  /** The file, relative to the repository root. */
  readonly path: string;
  /** The line of its opening fence, from 1. */
  readonly line: number;
  /** The fence's info string up to the first space (`ts`, `sh`, `` for none). */
  readonly language: string;
  /** The rest of the info string (`continues` in ```` ```ts continues ````). */
  readonly meta: string;
  readonly code: string;
}

/**
 * What a reader runs: a runnable block, or a chain of them: the blocks marked `continues` after it
 * go on from it. Each block's code starts with a comment naming its file and line.
 */
export interface Program {
  readonly path: string;
  /** The lines of the opening fences of its blocks, in order. */
  readonly lines: readonly number[];
  readonly language: string;
  readonly code: string;
}

/** Languages whose blocks are programs a reader would run: every such block runs in the tests. */
export const runnableLanguages = new Set(['ts', 'typescript', 'js', 'javascript']);

const fenceOpening = /^(\s{0,3})(`{3,}|~{3,})\s*([^\s`]*)\s*([^`]*?)\s*$/;

/** Every fenced code block of `markdown` (the file `path`), in order; an unclosed one is an error. */
export function codeBlocks(path: string, markdown: string): CodeBlock[] {
  const lines = markdown.split('\n');
  const blocks: CodeBlock[] = [];
  for (let index = 0; index < lines.length; index++) {
    const opening = fenceOpening.exec(lines[index]!);
    if (opening === null) continue;
    const [, indent, fence, language, meta] = opening as unknown as [string, string, string, string, string];
    const closing = new RegExp(`^\\s{0,3}${fence[0]}{${fence.length},}\\s*$`);
    const end = lines.findIndex((text, at) => at > index && closing.test(text));
    if (end === -1) throw new UnclosedFenceError(path, index + 1);
    const body = lines.slice(index + 1, end).map((text) => text.replace(new RegExp(`^ {0,${indent.length}}`), ''));
    blocks.push({ path, line: index + 1, language, meta, code: body.join('\n') + '\n' });
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

/**
 * The runnable blocks of one file as programs. A block marked ```` ```ts continues ```` goes on from
 * the runnable block before it, as a reader who follows a README section by section runs it: it joins
 * that block's program, which runs once, whole (its earlier blocks may leave handles open that only
 * its end closes).
 */
export function programsOf(path: string, markdown: string): Program[] {
  const programs: Program[] = [];
  for (const block of codeBlocks(path, markdown).filter((candidate) => runnableLanguages.has(candidate.language))) {
    const code = `// ${path}:${block.line}\n${block.code}`;
    const continued = programs.at(-1);
    if (!block.meta.split(/\s+/).includes('continues'))
      programs.push({ path, lines: [block.line], language: block.language, code });
    else if (continued === undefined) throw new NothingToContinueError(path, block.line);
    else
      programs[programs.length - 1] = {
        ...continued,
        lines: [...continued.lines, block.line],
        code: continued.code + code,
      };
  }
  return programs;
}

/** Every runnable program of the READMEs. */
export function runnablePrograms(root: string): Program[] {
  return readmePaths(root).flatMap((path) => programsOf(path, readFileSync(join(root, path), 'utf8')));
}
