import { InvalidArgumentError } from './errors.js';
import { HandleState } from './handles.js';
import { check, type NativeLibrary, nativeError } from './library.js';

const ANSWER_BYTES = 65536;

/**
 * An engine's connection to a kvreuse sidecar (kvreuse_sidecar_client.h), for engines and test engines in
 * Node: hand over a memfd with its layout, send block updates, close when the memory must no longer be
 * served. The answer to `adopt` is waited for on the calling thread (at most `timeoutMs`).
 */
export class SidecarClient {
  readonly path: string;
  readonly #library: NativeLibrary;
  readonly #socket: number;
  readonly #state: HandleState;

  /** @internal Use Transport.connectSidecar. */
  constructor(library: NativeLibrary, path: string) {
    if (typeof path !== 'string' || path.length === 0)
      throw new InvalidArgumentError('path', path, 'must be the socket path, a non-empty string');
    const socket = new Int32Array(1);
    check(library, 'kvt_sidecar_client_connect', library.api.kvt_sidecar_client_connect(path, socket));
    this.path = path;
    this.#library = library;
    this.#socket = socket[0] as number;
    this.#state = new HandleState(this, 'SidecarClient', `sidecar connection to ${path}`);
  }

  /**
   * Sends `adopt` with `memfd` and `layout` (no descriptor when `memfd` is undefined: GPU memory, which the
   * layout names by its `ipcHandle`); resolves with the sidecar's answer (`type: 'adopted'`), or throws the
   * NativeTransportError: NOT_ALLOWED with the refusal (its JSON) as detail, TIMEOUT, REMOTE_DISCONNECT.
   */
  adopt(memfd: number | undefined, layout: object, timeoutMs = 60_000): Record<string, unknown> {
    this.#state.assertOpen('adopt through a sidecar connection');
    if (memfd !== undefined && (!Number.isInteger(memfd) || memfd < 0 || memfd > 0x7fff_ffff))
      throw new InvalidArgumentError(
        'memfd',
        memfd,
        'must be undefined or an open file descriptor (a non-negative int32)',
      );
    if (!isPlainObject(layout))
      throw new InvalidArgumentError('layout', layout, 'must be a plain object to send as JSON');
    checkTimeout(timeoutMs);
    const answer = Buffer.alloc(ANSWER_BYTES);
    const { api } = this.#library;
    const status = api.kvt_sidecar_client_adopt(
      this.#socket,
      memfd ?? -1,
      JSON.stringify(layout),
      answer,
      ANSWER_BYTES,
      timeoutMs,
    );
    if (status < 0) throw nativeError(this.#library, 'kvt_sidecar_client_adopt', status);
    return JSON.parse(answer.toString('utf8', 0, answer.indexOf(0))) as Record<string, unknown>;
  }

  /** Sends one message (a JSON value, or raw bytes) with optional descriptors. */
  send(message: object | Uint8Array, fds: readonly number[] = []): void {
    this.#state.assertOpen('send through a sidecar connection');
    if (typeof message !== 'object' || message === null)
      throw new InvalidArgumentError('message', message, 'must be a Uint8Array or an object to send as JSON');
    if (!Array.isArray(fds)) throw new InvalidArgumentError('fds', fds, 'must be an array of open file descriptors');
    fds.forEach((fd, i) => {
      if (!Number.isInteger(fd) || fd < 0 || fd > 0x7fff_ffff)
        throw new InvalidArgumentError(`fds[${i}]`, fd, 'must be an open file descriptor (a non-negative int32)');
    });
    const bytes = message instanceof Uint8Array ? message : Buffer.from(JSON.stringify(message), 'utf8');
    const { api } = this.#library;
    const passed = fds.length === 0 ? null : Int32Array.from(fds);
    check(
      this.#library,
      'kvt_sidecar_client_send',
      api.kvt_sidecar_client_send(this.#socket, bytes, bytes.length, passed, fds.length),
    );
  }

  /** Waits at most `timeoutMs` for the sidecar's next message and parses it (TIMEOUT, REMOTE_DISCONNECT otherwise). */
  receive(timeoutMs = 60_000): Record<string, unknown> {
    this.#state.assertOpen('receive on a sidecar connection');
    checkTimeout(timeoutMs);
    const data = Buffer.alloc(ANSWER_BYTES);
    const length = new Uint32Array(1);
    const { api } = this.#library;
    check(
      this.#library,
      'kvt_sidecar_client_recv',
      api.kvt_sidecar_client_recv(this.#socket, data, ANSWER_BYTES, length, timeoutMs),
    );
    return JSON.parse(data.toString('utf8', 0, length[0])) as Record<string, unknown>;
  }

  /** Closes the connection: the sidecar withdraws what it adopted from it. */
  close(): void {
    if (!this.#state.isOpen) return;
    this.#state.markClosed();
    check(this.#library, 'kvt_sidecar_client_close', this.#library.api.kvt_sidecar_client_close(this.#socket));
  }
}

function isPlainObject(value: unknown): value is object {
  if (typeof value !== 'object' || value === null) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** A wait's bound as the library takes it (a uint32 of milliseconds), else InvalidArgumentError: -1 would wrap to forever. */
function checkTimeout(timeoutMs: number): void {
  if (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > 0xffff_ffff)
    throw new InvalidArgumentError('timeoutMs', timeoutMs, 'must be an integer number of milliseconds, 0 to 2^32 - 1');
}
