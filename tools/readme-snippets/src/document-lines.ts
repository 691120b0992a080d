// Where each line of a checked program comes from. Every block's code, and every fragment's context,
// opens with a heading comment naming its document and line, from which an error's line is told back.

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
 * nearest heading above it; undefined for a line above every heading.
 */
export function documentLineOf(code: string, line: number): DocumentLine | undefined {
  const lines = code.split('\n');
  for (let at = line - 2; at >= 0; at--) {
    const match = heading.exec(lines[at]!);
    if (match === null) continue;
    // A block's code starts on the line after its fence; a context's on the line its comment opens on.
    const first = Number(match[2]) + (match[3] === undefined ? 1 : 0);
    return { path: match[1]!, line: first + (line - 2 - at) };
  }
  return undefined;
}
