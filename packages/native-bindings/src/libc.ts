import koffi from 'koffi';
import { NativeTransportError } from './errors.js';
import { statusOf } from './status.js';

/** The libc.so.6 calls the facade makes itself: file memory (file-memory.ts) and the wake-up fds. */
export interface Libc {
  memfd_create(name: string, flags: number): number;
  ftruncate(fd: number, length: bigint): number;
  fcntl(fd: number, command: number, argument: number): number;
  mmap(address: bigint, length: bigint, protection: number, flags: number, fd: number, offset: bigint): bigint | number;
  munmap(address: bigint, length: bigint): number;
  close(fd: number): number;
  dup(fd: number): number;
  lseek(fd: number, offset: bigint, whence: number): bigint | number;
}

let bound: Libc | undefined;

/** libc, loaded and bound on first use, once per process. */
export function libc(): Libc {
  if (bound === undefined) {
    const library = koffi.load('libc.so.6');
    bound = {
      memfd_create: library.func('int memfd_create(const char *name, unsigned int flags)') as Libc['memfd_create'],
      ftruncate: library.func('int ftruncate(int fd, int64_t length)') as Libc['ftruncate'],
      fcntl: library.func('int fcntl(int fd, int cmd, int arg)') as Libc['fcntl'],
      mmap: library.func(
        'intptr_t mmap(uintptr_t addr, size_t length, int prot, int flags, int fd, int64_t offset)',
      ) as Libc['mmap'],
      munmap: library.func('int munmap(uintptr_t addr, size_t length)') as Libc['munmap'],
      close: library.func('int close(int fd)') as Libc['close'],
      dup: library.func('int dup(int fd)') as Libc['dup'],
      lseek: library.func('int64_t lseek(int fd, int64_t offset, int whence)') as Libc['lseek'],
    };
  }
  return bound;
}

/** The BACKEND NativeTransportError for a libc `call` that just failed doing `what`, naming its errno. */
export function libcFailure(call: string, what: string): NativeTransportError {
  return new NativeTransportError('BACKEND', statusOf('BACKEND'), call, `${what} failed with errno ${koffi.errno()}`);
}

/** A duplicate of `fd` for Node to own; throws a BACKEND NativeTransportError naming errno on failure. */
export function duplicateFd(fd: number, what: string): number {
  const duplicate = libc().dup(fd);
  if (duplicate < 0) throw libcFailure('dup', `dup(${fd}) of ${what}`);
  return duplicate;
}
