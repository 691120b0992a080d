// The adoption of an engine's GPU memory, over the fake CUDA driver of native/test/fake_cuda (host memory
// behind the driver's entry points, built here with make), across processes: an engine process
// (test/process/vram-sidecar-engine.ts) allocates vram, fills it from 4 KiB in and hands its CUDA IPC handle to a sidecar
// process (test/fake-cuda/vram-sidecar.ts), which opens it and serves it as a vram rank; a prefill worker
// there pulls the engine's blocks, verified. The engine killed, the sidecar serves no engine and keeps no
// mapping of its memory. It tests the sidecar's plumbing above the driver, never a GPU (tools/gpu-check).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { BLOCKS, testGeometry, transport } from '../test/support/endpoint-workers.js';
import { startChild } from '../test/support/child-process.js';

const nativeDir = fileURLToPath(new URL('../../../native', import.meta.url));
const cleanups: (() => unknown)[] = [];

/** How many mappings process `pid` has of the file with `inode` (the engine's allocation, in the fake). */
const mappingsOf = (pid: number, inode: string) =>
  readFileSync(`/proc/${pid}/maps`, 'utf8')
    .split('\n')
    .filter((line) => line.split(/\s+/)[4] === inode).length;
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('an engine’s GPU memory adopted by a sidecar over the fake CUDA driver', () => {
  it('serves verified pulls from the engine’s allocation, and keeps nothing of it once the engine is killed', async () => {
    execFileSync('make', ['-s', '-C', nativeDir, 'build/fake_cuda/libcuda.so.1'], { stdio: 'inherit' });
    const fakeDriver = { KVT_CUDA_LIBRARY: `${nativeDir}/build/fake_cuda/libcuda.so.1`, FAKE_CUDA_DEVICES: '1' };
    const directory = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-vram-'));
    cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
    const socket = join(directory, 'engine.sock');
    type Line = { event: string } & Record<string, unknown>;
    const sidecar = startChild<Line>('test/fake-cuda/vram-sidecar.ts', [socket], cleanups, fakeDriver);
    await sidecar.next('listening');
    // A handle the driver refuses to open, and a GPU the sidecar's machine does not have.
    const client = transport.connectSidecar(socket);
    const gpu = { workerId: 'engine-bad', geometry: testGeometry, blocks: BLOCKS, memory: 'vram', device: 0 };
    const refusedWith = (layout: object) => {
      client.send({ type: 'adopt', layout: { ...gpu, ipcHandle: Buffer.alloc(64).toString('base64'), ...layout } });
      return client.receive();
    };
    expect(refusedWith({})).toMatchObject({
      reason: 'bad-ipc-handle',
      message: expect.stringContaining('cannot be opened'),
    });
    expect(refusedWith({ device: 5 })).toMatchObject({
      reason: 'vram-unavailable',
      message: expect.stringContaining('no GPU 5'),
    });
    client.close();
    const engine = startChild<Line>('test/process/vram-sidecar-engine.ts', [socket], cleanups, fakeDriver);
    const { inode, answer } = await engine.next('adopted');
    expect(answer).toMatchObject({
      type: 'adopted',
      workerId: 'engine-gpu',
      banks: [{ offset: 4096, bytes: 1024 }, {}, {}, {}],
    });
    expect(inode).toMatch(/^[1-9][0-9]*$/);
    expect(await sidecar.next('adopted')).toMatchObject({ workerId: 'engine-gpu', banks: 4 });
    const receipt = await sidecar.next('receipt');
    expect(receipt).toMatchObject({
      requested: BLOCKS,
      blocks: BLOCKS,
      verify: 'full',
      checkedBlocks: BLOCKS,
      recomputed: { reasons: [] },
    });
    // The engine's allocation, opened in the sidecar through its handle.
    const sidecarPid = sidecar.child.pid as number;
    expect(mappingsOf(sidecarPid, inode as string)).toBe(1);

    engine.child.kill('SIGKILL');
    expect(await sidecar.next('withdrawn')).toMatchObject({
      workerId: 'engine-gpu',
      banksReturned: 4,
      banksRetained: 0,
      unmapped: true,
    });
    expect(await sidecar.next('state')).toEqual({ event: 'state', engines: 0 });
    expect(mappingsOf(sidecarPid, inode as string)).toBe(0);
    sidecar.send({});
    await sidecar.next('closed');
  }, 180_000);
});
