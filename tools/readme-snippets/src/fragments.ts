import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { blockHeading, contextHeading } from './document-lines.js';
import { MissingFragmentContextError, StrayFragmentContextError } from './errors.js';
import { type CodeBlock, codeBlocks, documentPaths, type Program } from './snippets.js';

const contextOpening = /^\s{0,3}<!--\s*fragment-context:/;
const contextClosing = /-->\s*$/;
const typeScript = new Set(['ts', 'typescript']);

/**
 * The ```` ```ts fragment ```` blocks of one file as modules to type-check, never to run. A fragment is
 * an excerpt: the names it uses but does not declare are stated in an HTML comment that ends on the
 * line right before its fence, which a reader of the rendered page does not see:
 * `<!-- fragment-context: import type { Registry } from '@kvreuse/registry'; declare const registry: Registry; -->`
 * (it may span lines; one inside a code block is an example of it, not a context). Each module is that
 * context, on the lines it spans, then the fragment.
 */
export function fragmentsOf(path: string, markdown: string): Program[] {
  const blocks = codeBlocks(path, markdown);
  const contexts = fragmentContexts(path, markdown.split('\n'), blocks);
  const fragments: Program[] = [];
  for (const block of blocks) {
    if (!typeScript.has(block.language) || !block.meta.split(/\s+/).includes('fragment')) continue;
    const context = contexts.get(block.line);
    if (context === undefined) throw new MissingFragmentContextError(path, block.line);
    contexts.delete(block.line);
    const code = `${contextHeading(path, context.line)}\n${context.code}\n${blockHeading(path, block.line)}\n${block.code}export {};\n`;
    const headingLines = [1, 2 + context.code.split('\n').length];
    fragments.push({ path, lines: [block.line], language: block.language, code, headingLines });
  }
  const stray = contexts.values().next();
  if (!stray.done) throw new StrayFragmentContextError(path, stray.value.line);
  return fragments;
}

interface FragmentContext {
  /** The line its comment opens on, from 1. */
  readonly line: number;
  /** What the comment holds, from that line on: a line of it is a line of the document. */
  readonly code: string;
}

/**
 * Every fragment-context comment of the file outside its code blocks `blocks`, by the line right after
 * it (where its fragment's fence must be).
 */
function fragmentContexts(
  path: string,
  lines: readonly string[],
  blocks: readonly CodeBlock[],
): Map<number, FragmentContext> {
  const fenced = (line: number): boolean => blocks.some((block) => block.line <= line && line <= block.closingLine);
  const contexts = new Map<number, FragmentContext>();
  for (let index = 0; index < lines.length; index++) {
    if (!contextOpening.test(lines[index]!) || fenced(index + 1)) continue;
    const end = closingIndexOf(lines, index, fenced);
    if (end === undefined || !contextClosing.test(lines[end]!)) throw new StrayFragmentContextError(path, index + 1);
    const text = lines.slice(index, end + 1).join('\n');
    const code = text
      .replace(contextOpening, '')
      .replace(contextClosing, '')
      .replace(/^[ \t]+/, '')
      .trimEnd();
    contexts.set(end + 2, { line: index + 1, code });
    index = end;
  }
  return contexts;
}

/**
 * The index of the line that closes the context comment opened at `opening`: the first to hold `-->`.
 * Undefined when a code block line (`fenced`, by line from 1) or another context comment comes first:
 * a comment that is never closed must not take a later block's `-->` for its end.
 */
function closingIndexOf(
  lines: readonly string[],
  opening: number,
  fenced: (line: number) => boolean,
): number | undefined {
  for (let index = opening; index < lines.length; index++) {
    if (index > opening && (fenced(index + 1) || contextOpening.test(lines[index]!))) return undefined;
    if (lines[index]!.includes('-->')) return index;
  }
  return undefined;
}

/** Every ts fragment of the READMEs and the package reference pages. */
export function documentFragments(root: string): Program[] {
  return documentPaths(root).flatMap((path) => fragmentsOf(path, readFileSync(join(root, path), 'utf8')));
}
