import koffi from 'koffi';
import { InvalidArgumentError, NativeTransportError } from './errors.js';
import { HandleState } from './handles.js';
import { libc, libcFailure } from './libc.js';
import type { MemoryRange } from './memory.js';
import { statusOf } from './status.js';

const F_GET_SEALS = 1034;
const F_SEAL_SHRINK = 0x2;
const SEEK_END = 2;
const PROT_READ_WRITE = 0x3;
const MAP_SHARED = 0x1;

/**
 * Another process's memory file (a memfd an engine passed to a sidecar), mapped shared into this process:
 * the engine owns the memory; this process owns only its mapping and its descriptor. `unmap()` drops
 * both — never the engine's pages, which live for as long as the engine (or any mapping) keeps the file.
 */
export class AdoptedMemory {
  readonly address: bigint;
  readonly bytes: number;
  readonly fd: number;
  readonly #state: HandleState;
  #view: Buffer | undefined;

  private constructor(address: bigint, bytes: number, fd: number) {
    this.address = address;
    this.bytes = bytes;
    this.fd = fd;
    this.#state = new HandleState(this, 'AdoptedMemory', `adopted memfd ${fd} (${bytes} bytes)`);
  }

  /**
   * Maps the whole file open as `fd` (taken over: closed by `unmap()`, or here when the map is refused).
   * Refused with INVALID_PARAM when it is not a file sealed against shrinking (a reader's copy out of a
   * file that shrank would fault) or is empty; BACKEND naming the failing call otherwise.
   */
  static map(fd: number): AdoptedMemory {
    if (!Number.isSafeInteger(fd) || fd < 0) throw new InvalidArgumentError('fd', fd, 'must be an open descriptor');
    const c = libc();
    const refuse = (error: NativeTransportError): never => {
      c.close(fd);
      throw error;
    };
    const seals = c.fcntl(fd, F_GET_SEALS, 0);
    if (seals < 0 || (seals & F_SEAL_SHRINK) === 0)
      refuse(
        new NativeTransportError(
          'INVALID_PARAM',
          statusOf('INVALID_PARAM'),
          'fcntl',
          `descriptor ${fd} is not a memfd sealed against shrinking (F_SEAL_SHRINK)`,
        ),
      );
    const bytes = Number(c.lseek(fd, 0n, SEEK_END));
    if (!(bytes > 0))
      refuse(new NativeTransportError('INVALID_PARAM', statusOf('INVALID_PARAM'), 'lseek', `memfd ${fd} is empty`));
    const address = BigInt(c.mmap(0n, BigInt(bytes), PROT_READ_WRITE, MAP_SHARED, fd, 0n));
    if (address === -1n) refuse(libcFailure('mmap', `mmap of memfd ${fd} (${bytes} bytes)`));
    return new AdoptedMemory(address, bytes, fd);
  }

  get isOpen(): boolean {
    return this.#state.isOpen;
  }

  /** What to register: `bytes` at `offset` of the mapping, with the memfd at that offset. */
  range(offset: number, bytes: number): MemoryRange {
    this.#state.assertOpen('register adopted memory');
    if (
      !Number.isSafeInteger(offset) ||
      !Number.isSafeInteger(bytes) ||
      offset < 0 ||
      bytes < 1 ||
      offset + bytes > this.bytes
    )
      throw new InvalidArgumentError('range', { offset, bytes }, `must lie inside the ${this.bytes} bytes adopted`);
    return { address: this.address + BigInt(offset), bytes, file: { fd: this.fd, offset } };
  }

  /** The memory itself, without a copy. Do not use it after `unmap()`. */
  view(): Buffer {
    this.#state.assertOpen('view adopted memory');
    this.#view ??= Buffer.from(koffi.view(this.address, this.bytes));
    return this.#view;
  }

  /** Drops this process's mapping and descriptor (after every region inside it was deregistered). */
  unmap(): void {
    this.#state.assertOpen('unmap adopted memory');
    this.#state.markClosed();
    this.#view = undefined;
    const c = libc();
    c.munmap(this.address, BigInt(this.bytes));
    c.close(this.fd);
  }
}
