/** Base of every error this tool throws; `code` says which. */
export abstract class ReadmeSnippetError extends Error {
  abstract readonly code: string;
}

/** A fence that opens a code block and is never closed: everything after it would be read as code. */
export class UnclosedFenceError extends ReadmeSnippetError {
  readonly code = 'UNCLOSED_FENCE';
  constructor(
    readonly path: string,
    readonly line: number,
  ) {
    super(`${path}:${line}: the code block opened here is never closed`);
    this.name = 'UnclosedFenceError';
  }
}

/** A block marked `continues` with no runnable block before it in its file. */
export class NothingToContinueError extends ReadmeSnippetError {
  readonly code = 'NOTHING_TO_CONTINUE';
  constructor(
    readonly path: string,
    readonly line: number,
  ) {
    super(`${path}:${line}: the block is marked "continues" but no ts or js block comes before it`);
    this.name = 'NothingToContinueError';
  }
}
