/** Base of every error this tool throws: a place in a document it cannot read; `code` says why. */
export abstract class ReadmeSnippetError extends Error {
  abstract readonly code: string;
  constructor(
    /** The document, relative to the repository root. */
    readonly path: string,
    /** The line, from 1. */
    readonly line: number,
    what: string,
  ) {
    super(`${path}:${line}: ${what}`);
    this.name = new.target.name;
  }
}

/** A fence that opens a code block and is never closed: everything after it would be read as code. */
export class UnclosedFenceError extends ReadmeSnippetError {
  readonly code = 'UNCLOSED_FENCE';
  constructor(path: string, line: number) {
    super(path, line, 'the code block opened here is never closed');
  }
}

/** A block marked `continues` with no runnable block before it in its file. */
export class NothingToContinueError extends ReadmeSnippetError {
  readonly code = 'NOTHING_TO_CONTINUE';
  constructor(path: string, line: number) {
    super(path, line, 'the block is marked "continues" but no ts or js block comes before it');
  }
}

/** A ```` ```ts fragment ```` block with no fragment-context comment on the line before it: it could not be type-checked. */
export class MissingFragmentContextError extends ReadmeSnippetError {
  readonly code = 'MISSING_FRAGMENT_CONTEXT';
  constructor(path: string, line: number) {
    super(
      path,
      line,
      'the ts fragment has no <!-- fragment-context: … --> comment on the line before it, stating the names it uses but does not declare',
    );
  }
}

/** A fragment-context comment that is never closed, or whose next line does not open a ```` ```ts fragment ```` block. */
export class StrayFragmentContextError extends ReadmeSnippetError {
  readonly code = 'STRAY_FRAGMENT_CONTEXT';
  constructor(path: string, line: number) {
    super(
      path,
      line,
      'the fragment-context comment opened here must end with --> on the line right before a ts fragment block',
    );
  }
}
