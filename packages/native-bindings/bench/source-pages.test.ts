import { spawn } from 'node:child_process';
import koffi from 'koffi';
import { describe, expect, it } from 'vitest';
import { FileMemory } from '../src/index.js';
import { mapSourcePages } from './source-pages.js';

const PAGE = 4096;

describe('mapSourcePages', () => {
  it("maps another process's shared file mapping read-only: the same bytes, at an offset inside it", () => {
    const memory = FileMemory.create(4 * PAGE);
    memory.view().forEach((_, i, view) => {
      view[i] = (i * 7) & 0xff;
    });
    // This process's own mapping, named by pid like another's: what the bench does with the source's pid.
    const pages = mapSourcePages(process.pid, memory.address + BigInt(PAGE), 2 * PAGE);
    expect(pages.view.equals(memory.view().subarray(PAGE, 3 * PAGE))).toBe(true);
    memory.view()[PAGE] = 0xee;
    expect(pages.view[0]).toBe(0xee);
    pages.unmap();
    memory.close();
  });

  it('refuses bytes that no single mapping of the process holds, naming the process and the address', () => {
    const memory = FileMemory.create(PAGE);
    expect(() => mapSourcePages(process.pid, memory.address, 2 * PAGE)).toThrow(
      new RegExp(
        `process ${process.pid} has no mapping that holds ${2 * PAGE} bytes at 0x${memory.address.toString(16)}`,
      ),
    );
    memory.close();
  });

  it('refuses memory that is not backed by a file, saying so', () => {
    const anonymous = Buffer.alloc(8 * PAGE);
    const address = BigInt(koffi.address(anonymous));
    expect(() => mapSourcePages(process.pid, address, PAGE)).toThrow(
      /through \/proc\/\d+\/map_files: it is not backed by a file$/,
    );
  });

  it('says so when the process is gone', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
    const pid = child.pid ?? -1;
    child.kill();
    await new Promise((resolve) => child.on('exit', resolve));
    expect(() => mapSourcePages(pid, 0x1000n, PAGE)).toThrow(
      `cannot read the mappings of process ${pid} (/proc/${pid}/maps): it has exited, or never ran here`,
    );
  });
});
