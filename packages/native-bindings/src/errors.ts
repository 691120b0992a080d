import { describeValue, KvreuseError, messageOf } from '@kvreuse/errors';
import type { StatusCodeName } from './status.js';

/** The kinds of handle the facade hands out; each names itself in errors. */
export type HandleKind =
  | 'Transport'
  | 'Agent'
  | 'Allocation'
  | 'Region'
  | 'Peer'
  | 'Operation'
  | 'RegisteredTemplate'
  | 'FileMemory'
  | 'SidecarListener'
  | 'SidecarClient';

export type FacadeErrorCode =
  | 'LIBRARY_NOT_FOUND'
  | 'LIBRARY_LOAD_FAILED'
  | 'LIBRARY_MISMATCH'
  | 'HANDLE_CLOSED'
  | 'FOREIGN_HANDLE'
  | 'INVALID_ARGUMENT';

/**
 * A call into libkvreuse_transport returned an error status. `code` is the status name without its
 * `KVT_ERR_` prefix (`'BUSY'`, `'INVALID_PARAM'`, …), `call` the native function that failed (or
 * that reported the failure, for an operation that ended with an error), and `detail` the library's
 * own description, which names the region, descriptor, peer or value involved.
 */
export class NativeTransportError extends KvreuseError<StatusCodeName | `UNKNOWN_STATUS_${number}`> {
  override readonly name = 'NativeTransportError';
  readonly code: StatusCodeName | `UNKNOWN_STATUS_${number}`;
  readonly status: number;
  readonly call: string;
  readonly detail: string;

  constructor(code: StatusCodeName | `UNKNOWN_STATUS_${number}`, status: number, call: string, detail: string) {
    super(`${call} failed with ${code}${detail === '' ? '' : `: ${detail}`}`);
    this.code = code;
    this.status = status;
    this.call = call;
    this.detail = detail;
  }
}

/** Base of the errors the facade raises itself, before or instead of calling the native library. */
export abstract class TransportUsageError extends KvreuseError<FacadeErrorCode> {}

/** No library file at the path given (or at any of the default locations, each listed). */
export class LibraryNotFoundError extends TransportUsageError {
  readonly code = 'LIBRARY_NOT_FOUND';
  override readonly name = 'LibraryNotFoundError';
  readonly searched: readonly string[];

  constructor(searched: readonly string[]) {
    super(
      `libkvreuse_transport not found; looked at ${searched.map((p) => JSON.stringify(p)).join(', ')}. ` +
        'On Linux with glibc on x64 or arm64, npm installs it prebuilt (@kvreuse/native-linux-<arch>-gnu, an ' +
        'optional dependency: do not omit optional dependencies); elsewhere build it with ' +
        '`npx kvreuse-build-native` from an installed @kvreuse/native-bindings (or `make -C native` in the ' +
        'kvreuse repository), or pass { libraryPath } to loadTransport.',
    );
    this.searched = searched;
  }
}

/** The file exists but could not be loaded (not a shared library, another cpu, …). */
export class LibraryLoadError extends TransportUsageError {
  readonly code = 'LIBRARY_LOAD_FAILED';
  override readonly name = 'LibraryLoadError';
  readonly path: string;

  constructor(path: string, cause: unknown) {
    super(`could not load ${JSON.stringify(path)}: ${messageOf(cause)}`, {
      cause,
    });
    this.path = path;
  }
}

/** The library loaded but speaks another version of the API than this facade. */
export class LibraryMismatchError extends TransportUsageError {
  readonly code = 'LIBRARY_MISMATCH';
  override readonly name = 'LibraryMismatchError';
  readonly path: string;
  readonly what: string;
  readonly expected: unknown;
  readonly actual: unknown;

  constructor(path: string, what: string, expected: unknown, actual: unknown) {
    super(`${JSON.stringify(path)}: ${what} is ${describeValue(actual)}, this facade needs ${describeValue(expected)}`);
    this.path = path;
    this.what = what;
    this.expected = expected;
    this.actual = actual;
  }
}

/** A handle was used after `close()`, `free()`, `deregister()`, `unload()` or `release()`. */
export class HandleClosedError extends TransportUsageError {
  readonly code = 'HANDLE_CLOSED';
  override readonly name = 'HandleClosedError';
  readonly handle: HandleKind;
  readonly label: string;
  readonly action: string;

  constructor(handle: HandleKind, label: string, action: string) {
    super(`cannot ${action}: ${handle} ${label} is closed`);
    this.handle = handle;
    this.label = label;
    this.action = action;
  }
}

/** A handle of one agent was given to another agent. */
export class ForeignHandleError extends TransportUsageError {
  readonly code = 'FOREIGN_HANDLE';
  override readonly name = 'ForeignHandleError';
  readonly handle: HandleKind;
  readonly label: string;
  readonly agent: string;

  constructor(handle: HandleKind, label: string, agent: string) {
    super(`${handle} ${label} belongs to another agent than ${JSON.stringify(agent)}`);
    this.handle = handle;
    this.label = label;
    this.agent = agent;
  }
}

/** An argument the facade can reject before calling the native library. */
export class InvalidArgumentError extends TransportUsageError {
  readonly code = 'INVALID_ARGUMENT';
  override readonly name = 'InvalidArgumentError';
  readonly argument: string;
  readonly value: unknown;
  readonly rule: string;

  constructor(argument: string, value: unknown, rule: string) {
    super(`${argument} = ${describeValue(value)}: ${rule}`);
    this.argument = argument;
    this.value = value;
    this.rule = rule;
  }
}
