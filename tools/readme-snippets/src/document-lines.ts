// Where each line of a checked program comes from. Every block's code, and every fragment's context,
// opens with a heading comment naming its document and line, from which an error's line is told back. The
// program records which of its lines are headings: a block may hold a line that reads as one.

/** The heading of a block's code in a program: its document and the line of its opening fence. */
export function blockHeading(path: string, fenceLine: number): string {
  return `// ${path}:${fenceLine}`;
}

/** The heading of a fragment's context: its document and the line its comment opens on. */
export function contextHeading(path: string, commentLine: number): string {
  return `// ${path}:${commentLine} (fragment-context)`;
}

const heading = /^\/\/ (\S+\.md):(\d+)( \(fragment-context\))?$/;

/** A line of a document, from 1. */
export interface DocumentLine {
  /** The document, relative to the repository root. */
  readonly path: string;
  readonly line: number;
}

/**
 * The document line that the `line`-th line (from 1) of a program's code was written from, told by the
 * nearest of its `headingLines` above it; undefined for a line above every heading. A line of the code that
 * reads as a heading, and is not one of them, is code.
 */
export function documentLineOf(
  { code, headingLines }: { readonly code: string; readonly headingLines: readonly number[] },
  line: number,
): DocumentLine | undefined {
  const lines = code.split('\n');
  const above = headingLines.filter((headingLine) => headingLine < line);
  if (above.length === 0) return undefined;
  const headingLine = Math.max(...above);
  const match = heading.exec(lines[headingLine - 1] ?? '');
  if (match === null) throw new Error(`line ${headingLine} of a program is no heading: ${lines[headingLine - 1]}`);
  // A block's code starts on the line after its fence; a context's on the line its comment opens on.
  const first = Number(match[2]) + (match[3] === undefined ? 1 : 0);
  return { path: match[1]!, line: first + (line - 1 - headingLine) };
}
