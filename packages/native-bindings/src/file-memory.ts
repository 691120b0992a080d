import koffi from 'koffi';
import { InvalidArgumentError, type NativeTransportError } from './errors.js';
import { HandleState } from './handles.js';
import { libc, libcFailure } from './libc.js';
import type { MemoryRange } from './memory.js';

const MFD_CLOEXEC = 0x1;
const MFD_ALLOW_SEALING = 0x2;
const F_ADD_SEALS = 1033;
const F_SEAL_SHRINK = 0x2;
const PROT_READ_WRITE = 0x3;
const MAP_SHARED = 0x1;

/**
 * Memory that is a shared mapping of a new memfd sealed against shrinking — the form of framework memory
 * that readers on the same host copy themselves (register `range()`; see MemoryRange.file), for Node hosts
 * that own their banks, tests and benches. The caller owns it: `close()` unmaps it and closes the memfd,
 * after every region inside it was deregistered.
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
    let address = -1n;
    let error: NativeTransportError | undefined;
    if (c.ftruncate(fd, BigInt(bytes)) !== 0)
      error = libcFailure('ftruncate', `ftruncate of memfd ${fd} to ${bytes} bytes`);
    else if (c.fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) !== 0)
      error = libcFailure('fcntl', `sealing memfd ${fd} against shrinking`);
    else {
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

  /** What to register: the whole mapping, with its memfd at offset 0. */
  range(): MemoryRange {
    this.#state.assertOpen('register file memory');
    return { address: this.address, bytes: this.bytes, file: { fd: this.fd, offset: 0 } };
  }

  /** The memory itself, without a copy. Do not use it after `close()` (JavaScript cannot revoke it). */
  view(): Buffer {
    this.#state.assertOpen('view file memory');
    this.#view ??= Buffer.from(koffi.view(this.address, this.bytes));
    return this.#view;
  }

  /** Unmaps the memory and closes the memfd. An agent that registered a range of it keeps its own duplicate. */
  close(): void {
    this.#state.assertOpen('close file memory');
    this.#state.markClosed();
    this.#view = undefined;
    const c = libc();
    c.munmap(this.address, BigInt(this.bytes));
    c.close(this.fd);
  }
}
