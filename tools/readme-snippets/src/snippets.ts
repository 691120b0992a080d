import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { blockHeading } from './document-lines.js';
import { NothingToContinueError, UnclosedFenceError } from './errors.js';

/** One fenced code block of a Markdown file. */
export interface CodeBlock {
  /** The file, relative to the repository root. */
  readonly path: string;
  /** The line of its opening fence, from 1. */
  readonly line: number;
  /** The line of its closing fence. */
  readonly closingLine: number;
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
  /**
   * The lines of `code` (from 1) that are headings naming a document line (`document-lines.ts`): a line of a
   * block that reads as one is code all the same.
   */
  readonly headingLines: readonly number[];
}

/**
 * Languages whose blocks are programs a reader would run: every such block runs in the tests, but one
 * marked ```` ```ts fragment ````, an excerpt that needs what the text around it sets up (type-checked
 * only, with the context it states: `fragmentsOf`).
 */
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
    blocks.push({ path, line: index + 1, closingLine: end + 1, language, meta, code: body.join('\n') + '\n' });
    index = end;
  }
  return blocks;
}

/**
 * The documents a user reads, relative to the repository root: the repository's README, every
 * package's, and every package's reference page in docs/packages.
 */
export function documentPaths(root: string): string[] {
  const packages = readdirSync(join(root, 'packages'))
    .filter((dir) => existsSync(join(root, 'packages', dir, 'README.md')))
    .sort()
    .map((dir) => `packages/${dir}/README.md`);
  const references = readdirSync(join(root, 'docs', 'packages'))
    .filter((file) => file.endsWith('.md'))
    .sort()
    .map((file) => `docs/packages/${file}`);
  return ['README.md', ...packages, ...references];
}

/**
 * The runnable blocks of one file as programs. A block marked ```` ```ts continues ```` goes on from
 * the runnable block before it, as a reader who follows a README section by section runs it: it joins
 * that block's program, which runs once, whole (its earlier blocks may leave handles open that only
 * its end closes). `earlier` is what a first such block goes on from: for a package's reference page
 * in docs/packages, the last program of the package's README, whose example the page continues.
 */
export function programsOf(path: string, markdown: string, earlier?: Program): Program[] {
  const programs: Program[] = [];
  const runnable = (block: CodeBlock): boolean =>
    runnableLanguages.has(block.language) && !block.meta.split(/\s+/).includes('fragment');
  for (const block of codeBlocks(path, markdown).filter(runnable)) {
    const code = `${blockHeading(path, block.line)}\n${block.code}`;
    const continued = programs.at(-1) ?? (earlier === undefined ? undefined : { ...earlier, path });
    if (!block.meta.split(/\s+/).includes('continues'))
      programs.push({ path, lines: [block.line], language: block.language, code, headingLines: [1] });
    else if (continued === undefined) throw new NothingToContinueError(path, block.line);
    else {
      const joined = {
        ...continued,
        lines: [...continued.lines, block.line],
        code: continued.code + code,
        headingLines: [...continued.headingLines, continued.code.split('\n').length],
      };
      programs.splice(Math.max(programs.length - 1, 0), 1, joined);
    }
  }
  return programs;
}

/** Every runnable program of the READMEs and the package reference pages. */
export function runnablePrograms(root: string): Program[] {
  const programs = new Map<string, Program[]>();
  for (const path of documentPaths(root)) {
    const readme = /^docs\/packages\/(.+)\.md$/.exec(path)?.[1];
    const earlier = readme === undefined ? undefined : programs.get(`packages/${readme}/README.md`)?.at(-1);
    programs.set(path, programsOf(path, readFileSync(join(root, path), 'utf8'), earlier));
  }
  return [...programs.values()].flat();
}
