import koffi from 'koffi';
import { InvalidArgumentError, NativeTransportError } from './errors.js';
import { HandleState } from './handles.js';
import { libc, libcFailure } from './libc.js';
import type { MemoryRange } from './memory.js';
import { statusOf } from './status.js';

const MFD_CLOEXEC = 0x1;
const MFD_ALLOW_SEALING = 0x2;
const F_ADD_SEALS = 1033;
const F_GET_SEALS = 1034;
const F_SEAL_SHRINK = 0x2;
const SEEK_END = 2;
const PROT_READ_WRITE = 0x3;
const MAP_SHARED = 0x1;

/**
 * Memory that is a shared mapping of a memfd sealed against shrinking — the form of framework memory
 * that readers on the same host copy themselves (register `range()`; see MemoryRange.file): a new one
 * (`create`, for Node hosts that own their banks, tests and benches) or another process's (`map`, e.g.
 * the memfd an engine passed a sidecar, whose pages stay its owner's). `close()` unmaps this process's
 * mapping and closes its descriptor, after every region inside it was deregistered.
 */
export class FileMemory {
  readonly address: bigint;
  readonly bytes: number;
  readonly fd: number;
  readonly #state: HandleState;
  #view: Buffer | undefined;

  private constructor(address: bigint, bytes: number, fd: number) {
    this.address = address;
    this.bytes = bytes;
    this.fd = fd;
    this.#state = new HandleState(this, 'FileMemory', `memfd ${fd} (${bytes} bytes)`);
  }

  /** `bytes` (a positive safe integer) of zeroed memory. Throws a BACKEND NativeTransportError naming the failing call. */
  static create(bytes: number): FileMemory {
    if (!Number.isSafeInteger(bytes) || bytes <= 0)
      throw new InvalidArgumentError('bytes', bytes, 'must be a positive safe integer');
    const c = libc();
    const fd = c.memfd_create('kvreuse-bank', MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) throw libcFailure('memfd_create', `memfd_create of ${bytes} bytes`);
    let error: NativeTransportError | undefined;
    if (c.ftruncate(fd, BigInt(bytes)) !== 0)
      error = libcFailure('ftruncate', `ftruncate of memfd ${fd} to ${bytes} bytes`);
    else if (c.fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) !== 0)
      error = libcFailure('fcntl', `sealing memfd ${fd} against shrinking`);
    return FileMemory.#mapShared(fd, bytes, error);
  }

  /** Maps `bytes` of `fd` shared unless `error` already refused it; on any refusal closes `fd` and throws. */
  static #mapShared(fd: number, bytes: number, error: NativeTransportError | undefined): FileMemory {
    const c = libc();
    let address = -1n;
    if (error === undefined) {
      address = BigInt(c.mmap(0n, BigInt(bytes), PROT_READ_WRITE, MAP_SHARED, fd, 0n));
      if (address === -1n) error = libcFailure('mmap', `mmap of memfd ${fd} (${bytes} bytes)`);
    }
    if (error !== undefined) {
      c.close(fd);
      throw error;
    }
    return new FileMemory(address, bytes, fd);
  }

  get isOpen(): boolean {
    return this.#state.isOpen;
  }

  /**
   * Maps the whole file open as `fd` (taken over: closed by `close()`, or here when the map is refused).
   * Refused with INVALID_PARAM when it is not a file sealed against shrinking (a reader's copy out of a
   * file that shrank would fault) or is empty; BACKEND naming the failing call otherwise.
   */
  static map(fd: number): FileMemory {
    if (!Number.isSafeInteger(fd) || fd < 0) throw new InvalidArgumentError('fd', fd, 'must be an open descriptor');
    const c = libc();
    const refusal = (detail: string) =>
      new NativeTransportError('INVALID_PARAM', statusOf('INVALID_PARAM'), 'FileMemory.map', detail);
    const seals = c.fcntl(fd, F_GET_SEALS, 0);
    const bytes = Number(c.lseek(fd, 0n, SEEK_END));
    let error: NativeTransportError | undefined;
    if (seals < 0 || (seals & F_SEAL_SHRINK) === 0)
      error = refusal(`descriptor ${fd} is not a memfd sealed against shrinking (F_SEAL_SHRINK)`);
    else if (!(bytes > 0)) error = refusal(`memfd ${fd} is empty`);
    return FileMemory.#mapShared(fd, bytes, error);
  }

  /** What to register: `bytes` at `offset` of the mapping (the whole by default), with the memfd at that offset. */
  range(offset = 0, bytes = this.bytes - offset): MemoryRange {
    this.#state.assertOpen('register file memory');
    if (
      !Number.isSafeInteger(offset) ||
      !Number.isSafeInteger(bytes) ||
      offset < 0 ||
      bytes < 1 ||
      offset + bytes > this.bytes
    )
      throw new InvalidArgumentError('range', { offset, bytes }, `must lie inside the ${this.bytes} bytes mapped`);
    return { address: this.address + BigInt(offset), bytes, file: { fd: this.fd, offset } };
  }

  /** The memory itself, without a copy. Do not use it after `close()` (JavaScript cannot revoke it). */
  view(): Buffer {
    this.#state.assertOpen('view file memory');
    this.#view ??= Buffer.from(koffi.view(this.address, this.bytes));
    return this.#view;
  }

  /**
   * Unmaps the memory and closes the memfd; a second call does nothing. An agent that registered a range of
   * it keeps its own duplicate.
   */
  close(): void {
    if (!this.#state.isOpen) return;
    this.#state.markClosed();
    this.#view = undefined;
    const c = libc();
    c.munmap(this.address, BigInt(this.bytes));
    c.close(this.fd);
  }
}
