// The pages another process's bank lives in, mapped read-only into this process, for a memcpy anchor
// that copies the very memory a pull reads. The same number of bytes copied between two other buffers
// is not the same work on this kind of machine: copies of 308 MB between different pairs of buffers,
// interleaved in one process, run at persistently different speeds (8.2–8.6 against 9.7 GB/s), a
// property of the pages each buffer got that lasts as long as the buffer.
import { closeSync, openSync, readFileSync } from 'node:fs';
import koffi from 'koffi';
import { libc, libcFailure } from '../src/libc.js';

const PROT_READ = 0x1;
const MAP_SHARED = 0x1;

export interface SourcePages {
  /** The source's `bytes` from `address` on, read-only. Do not use it after `unmap()`. */
  readonly view: Buffer;
  unmap(): void;
}

/**
 * Maps `bytes` at `address` of process `pid` into this one through the file behind that mapping
 * (/proc/<pid>/map_files, which needs CAP_SYS_ADMIN): a bank of the library's allocator or a FileMemory,
 * both shared mappings of a memfd. Throws naming what it could not find or map.
 */
export function mapSourcePages(pid: number, address: bigint, bytes: number): SourcePages {
  let maps: string;
  try {
    maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
  } catch (cause) {
    throw new Error(
      `cannot read the mappings of process ${pid} (/proc/${pid}/maps): it has exited, or never ran here`,
      { cause },
    );
  }
  const mapping = maps
    .split('\n')
    .map((line) => line.split(/\s+/))
    .find(([range]) => {
      const [start, end] = (range ?? '').split('-').map((hex) => BigInt(`0x${hex || '0'}`));
      return start !== undefined && end !== undefined && start <= address && address + BigInt(bytes) <= end;
    });
  if (mapping === undefined)
    throw new Error(`process ${pid} has no mapping that holds ${bytes} bytes at 0x${address.toString(16)}`);
  const [range = '', , fileOffset = '0'] = mapping;
  const start = BigInt(`0x${range.split('-')[0]}`);
  let fd: number;
  try {
    fd = openSync(`/proc/${pid}/map_files/${range}`, 'r');
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code ?? String(cause);
    const why =
      code === 'ENOENT'
        ? 'it is not backed by a file'
        : code === 'EPERM' || code === 'EACCES'
          ? 'opening it needs CAP_SYS_ADMIN'
          : code;
    throw new Error(`cannot open process ${pid}'s mapping ${range} through /proc/${pid}/map_files: ${why}`, { cause });
  }
  try {
    const mapped = BigInt(
      libc().mmap(0n, BigInt(bytes), PROT_READ, MAP_SHARED, fd, BigInt(`0x${fileOffset}`) + (address - start)),
    );
    if (mapped === -1n) throw libcFailure('mmap', `mmap of ${bytes} bytes of process ${pid}'s mapping ${range}`);
    return {
      view: Buffer.from(koffi.view(mapped, bytes)),
      unmap: () => void libc().munmap(mapped, BigInt(bytes)),
    };
  } finally {
    closeSync(fd);
  }
}
