/**
 * The brand every kvreuse error carries. It is a registered symbol (`Symbol.for`), so an error made by
 * one installed copy of a package is recognised by another copy of this module.
 */
const KVREUSE_ERROR: unique symbol = Symbol.for('@kvreuse/errors/KvreuseError');

/**
 * Base of every error a kvreuse package throws. `code` is stable across releases and is what callers
 * branch on; `name` is the concrete class's name; the message names what was refused and the value.
 */
export abstract class KvreuseError<Code extends string = string> extends Error {
  readonly [KVREUSE_ERROR] = true;
  abstract readonly code: Code;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * Base of the kvreuse errors that report a programmer's mistake (a call of the wrong shape) rather than
 * refused input; a `TypeError`, with the same brand and `code` as every other kvreuse error.
 */
export abstract class KvreuseTypeError<Code extends string = string> extends TypeError {
  readonly [KVREUSE_ERROR] = true;
  abstract readonly code: Code;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Whether `value` is an error of any kvreuse package (of any installed copy of it). */
export function isKvreuseError(value: unknown): value is KvreuseError | KvreuseTypeError {
  return (
    typeof value === 'object' && value !== null && (value as { [KVREUSE_ERROR]?: unknown })[KVREUSE_ERROR] === true
  );
}

/** The stable `code` of a kvreuse error; `undefined` for anything else (a plain `Error`, a string, …). */
export function codeOf(value: unknown): string | undefined {
  return isKvreuseError(value) ? value.code : undefined;
}
