import { Socket } from 'node:net';
import { messageOf } from '@kvreuse/errors';
import { InvalidArgumentError } from './errors.js';
import { HandleState } from './handles.js';
import { duplicateFd, libc } from './libc.js';
import { check, type NativeLibrary } from './library.js';

/** What an engine's connection to a sidecar listener brought, in order per connection (`closed` last). */
export type SidecarEvent =
  | { readonly kind: 'connected'; readonly connection: number; readonly pid: number; readonly uid: number }
  /** A message and the descriptors passed with it: the receiver's to close from now on. */
  | { readonly kind: 'message'; readonly connection: number; readonly data: Buffer; readonly fds: readonly number[] }
  /** A packet the library refused (too large, too many descriptors): nothing of it was kept. */
  | { readonly kind: 'malformed'; readonly connection: number; readonly reason: string; readonly detail: string }
  | { readonly kind: 'closed'; readonly connection: number };

const MAX_MESSAGE = 65536;
const MAX_FDS = 8;
const kinds = { 1: 'connected', 2: 'message', 3: 'malformed', 4: 'closed' } as const;

/**
 * The native side of an adoption sidecar's socket (kvreuse_sidecar.h): a unix SOCK_SEQPACKET socket at
 * `path` whose library thread accepts engines' connections and receives their messages with the
 * descriptors they pass; each is handed to `onEvent` on Node's thread, through the listener's wake-up pipe.
 */
export class SidecarListener {
  readonly path: string;
  readonly #library: NativeLibrary;
  readonly #id: number;
  readonly #state: HandleState;
  readonly #wake: Socket;
  readonly #onEvent: (event: SidecarEvent) => void;
  readonly #data = Buffer.alloc(MAX_MESSAGE);
  readonly #fds = new Int32Array(MAX_FDS);
  readonly #out = new Uint32Array(5);

  /** @internal Use Transport.listenSidecar. */
  constructor(library: NativeLibrary, path: string, onEvent: (event: SidecarEvent) => void) {
    if (typeof path !== 'string' || path.length === 0)
      throw new InvalidArgumentError('path', path, 'must be the socket path, a non-empty string');
    if (typeof onEvent !== 'function') throw new InvalidArgumentError('onEvent', onEvent, 'must be a function');
    const id = new Uint32Array(1);
    check(library, 'kvt_sidecar_listen', library.api.kvt_sidecar_listen(path, id));
    this.path = path;
    this.#library = library;
    this.#id = id[0] as number;
    this.#onEvent = onEvent;
    this.#state = new HandleState(this, 'SidecarListener', `sidecar listener at ${path}`);
    const fd = new Int32Array(1);
    check(library, 'kvt_sidecar_wake_fd', library.api.kvt_sidecar_wake_fd(this.#id, fd));
    this.#wake = new Socket({
      fd: duplicateFd(fd[0] ?? -1, `sidecar listener ${path}'s wake-up pipe`),
      readable: true,
    });
    this.#wake.on('data', () => this.#drain());
    this.#wake.on('error', (error) =>
      process.emitWarning(`sidecar listener ${path}: wake-up pipe failed: ${error.message}`),
    );
  }

  get isOpen(): boolean {
    return this.#state.isOpen;
  }

  /** Sends one message (1 to 65536 bytes) to an engine; a NativeTransportError (BUSY, REMOTE_DISCONNECT, NOT_FOUND) otherwise. */
  send(connection: number, data: string | Uint8Array): void {
    this.#state.assertOpen('send on a sidecar connection');
    if (!Number.isInteger(connection) || connection < 0 || connection > 0xffff_ffff)
      throw new InvalidArgumentError('connection', connection, 'must be a connection id from a connected event');
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (!(bytes instanceof Uint8Array))
      throw new InvalidArgumentError('data', data, 'must be a Uint8Array or a string');
    const { api } = this.#library;
    check(this.#library, 'kvt_sidecar_send', api.kvt_sidecar_send(this.#id, connection, bytes, bytes.length));
  }

  /** Ends a connection from this side; its `closed` event follows. */
  disconnect(connection: number): void {
    this.#state.assertOpen('disconnect a sidecar connection');
    check(this.#library, 'kvt_sidecar_disconnect', this.#library.api.kvt_sidecar_disconnect(this.#id, connection));
  }

  /** Closes every connection and the socket (its file removed); descriptors of events not yet handed out are closed. */
  close(): void {
    if (!this.#state.isOpen) return;
    this.#state.markClosed();
    this.#wake.destroy();
    check(this.#library, 'kvt_sidecar_close', this.#library.api.kvt_sidecar_close(this.#id));
  }

  #drain(): void {
    while (this.#state.isOpen) {
      const event = this.#next();
      if (event === undefined) return;
      // Thrown here, it would escape the wake-up pipe's handler (an uncaught exception) and hold back the rest.
      try {
        this.#onEvent(event);
      } catch (error) {
        process.emitWarning(`sidecar listener ${this.path}: onEvent threw: ${messageOf(error)}`);
      }
    }
  }

  #next(): SidecarEvent | undefined {
    const out = this.#out;
    const [kind, connection, length, fdCount, got] = [0, 1, 2, 3, 4].map((i) => out.subarray(i, i + 1));
    const { api } = this.#library;
    check(
      this.#library,
      'kvt_sidecar_poll',
      api.kvt_sidecar_poll(this.#id, kind!, connection!, this.#data, MAX_MESSAGE, length!, this.#fds, fdCount!, got!),
    );
    if (out[4] !== 1) return undefined;
    const id = out[1] as number;
    const data = Buffer.from(this.#data.subarray(0, out[2]));
    switch (kinds[out[0] as keyof typeof kinds]) {
      case 'connected': {
        const { pid, uid } = JSON.parse(data.toString('utf8')) as { pid: number; uid: number };
        return { kind: 'connected', connection: id, pid, uid };
      }
      case 'message':
        return { kind: 'message', connection: id, data, fds: Array.from(this.#fds.subarray(0, out[3])) };
      case 'malformed': {
        const text = data.toString('utf8');
        const colon = text.indexOf(':');
        return {
          kind: 'malformed',
          connection: id,
          reason: text.slice(0, colon),
          detail: text.slice(colon + 1).trim(),
        };
      }
      default:
        return { kind: 'closed', connection: id };
    }
  }
}

/** Closes descriptors received with a message that nothing keeps. */
export function closeReceivedFds(fds: readonly number[]): void {
  for (const fd of fds) libc().close(fd);
}
