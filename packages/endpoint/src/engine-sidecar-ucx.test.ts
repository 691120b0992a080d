// The adoption sidecar across OS processes on ucx: an engine process owning its KV memory in a memfd
// (test/process/sidecar-engine.ts) hands it to a sidecar process (test/process/ucx-engine-sidecar.ts),
// which serves it; a prefill rank here pulls from it, verified. The engine is killed while a pull holds
// its pins: the pins fail as engine-gone, the sidecar keeps nothing of the engine's memory and runs on.
import { createHash } from 'node:crypto';
import { dirname, join } from 'node:path';
import { blockHash, noneHash } from '@kvreuse-internal/test-engine';
import { type Geometry, layoutRankBanks } from '@kvreuse/descriptors';
import { openClusterSecret } from '@kvreuse/discovery';
import { blockHashScheme, hashBlockChain } from '@kvreuse/inventory';
import { watchWorkerReadiness, type WorkerReadiness } from '@kvreuse/discovery';
import { closeSync, ftruncateSync, openSync } from 'node:fs';
import { FileMemory } from '@kvreuse/native-bindings';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startChild } from '../test/support/child-process.js';
import {
  BLOCKS,
  hintFor,
  sqliteDiscovery,
  allReady,
  openWorker,
  start,
  testGeometry,
  transport,
  ucxPrefill,
} from '../test/support/endpoint-workers.js';

const inCi = !['', '0', 'false', undefined].includes(process.env['CI']);
const ucxTestsRun = inCi || transport.capabilities().backends.includes('ucx');
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface SidecarLine {
  readonly event: 'listening' | 'connected' | 'adopted' | 'refused' | 'withdrawn' | 'state' | 'closed';
  readonly [field: string]: unknown;
}

/** A sidecar process over a new SQLite discovery file, listening; its socket lies beside that file. */
async function startSidecar() {
  const { path, store } = sqliteDiscovery(cleanups);
  const socket = join(dirname(path), 'engine.sock');
  const sidecar = startChild<SidecarLine>('test/process/ucx-engine-sidecar.ts', [path, socket], cleanups);
  await sidecar.next('listening');
  return { path, store, socket, sidecar };
}

/**
 * A sidecar process serving the engine process of sidecar-engine.ts (adopted, ready in discovery), and a
 * prefill rank here to read from it; `seen` follows the engine worker's readiness.
 */
async function servedEngine() {
  const { path, store, socket, sidecar } = await startSidecar();
  const engine = startChild<{ event: 'adopted'; answer: { incarnation: string; banks: unknown[] } }>(
    'test/process/sidecar-engine.ts',
    [socket],
    cleanups,
  );
  const { answer } = await engine.next('adopted');
  expect(answer).toMatchObject({
    type: 'adopted',
    workerId: 'engine-0',
    banks: [{ offset: 0, bytes: 1024 }, {}, {}, {}],
  });
  const adopted = await sidecar.next('adopted');
  const source = { workerId: 'engine-0', incarnation: answer.incarnation, epoch: adopted['epoch'] as number };
  const seen: WorkerReadiness[] = [];
  const watch = await watchWorkerReadiness(store, 'engine-0', { onChange: (readiness) => seen.push(readiness) });
  cleanups.push(() => watch.close());
  await vi.waitFor(() => expect(watch.current.ready).toBe(true), { timeout: 60_000, interval: 10 });
  const prefill = await ucxPrefill(store, path, cleanups);
  const reader = prefill.ranks[0]!;
  return { sidecar, socket, engine, source, reader, seen };
}

describe.skipIf(!ucxTestsRun)('EngineSidecar across processes on ucx', () => {
  it('serves a verified pull from an engine’s own memory; when the engine dies its pins fail as engine-gone and nothing borrowed remains', async () => {
    const { sidecar, socket, engine, source, reader, seen } = await servedEngine();

    const receipt = await reader.endpoint.pull({
      hint: hintFor(source, BLOCKS),
      destinationBlocks: Uint32Array.from({ length: BLOCKS }, (_, i) => BLOCKS - 1 - i),
    });
    expect(receipt).toMatchObject({
      requested: BLOCKS,
      blocks: BLOCKS,
      checkedBlocks: BLOCKS,
      recomputed: { reasons: [] },
    });
    // Registered with the engine's memfd: this reader, on the same host, copied out of the file itself.
    expect(reader.agent.counters().fileReadBytes).toBeGreaterThan(0);

    // A pull holds its pins (its completions held back); the engine dies under it.
    const posted = reader.endpoint.ledger.counts().posted;
    reader.agent.faults.delayCompletions('forever');
    const pulling = reader.endpoint.pull({ hint: hintFor(source, 4), destinationBlocks: Uint32Array.of(0, 1, 2, 3) });
    await vi.waitFor(() => expect(reader.endpoint.ledger.counts().posted).toBeGreaterThan(posted), {
      timeout: 60_000,
      interval: 10,
    });
    engine.child.kill('SIGKILL');
    expect(await sidecar.next('withdrawn')).toMatchObject({
      workerId: 'engine-0',
      pinsRevoked: 1,
      banksReturned: 4,
      banksRetained: 0,
      unmapped: true,
    });
    const lost = await pulling;
    reader.agent.faults.clear();
    // The lost pin gives the read up at once, and says why.
    expect(lost).toMatchObject({
      blocks: 0,
      recomputed: {
        reasons: [
          { kind: 'operation-failed', code: 'OPERATION_TIMED_OUT', detail: expect.stringContaining('(engine-gone)') },
          { kind: 'pin-lost', reason: 'engine-gone' },
        ],
      },
    });
    await vi.waitFor(() => expect(seen.at(-1)?.ready).toBe(false), { timeout: 60_000, interval: 10 });

    sidecar.send({});
    expect(await sidecar.next('state')).toMatchObject({ engines: 0, mappings: 0, descriptors: 0 });

    // The sidecar runs on: another engine adopts, and closing the sidecar withdraws it the same way.
    const next = startChild<{ event: 'adopted'; answer: object }>(
      'test/process/sidecar-engine.ts',
      [socket, 'engine-2'],
      cleanups,
    );
    expect((await next.next('adopted')).answer).toMatchObject({ type: 'adopted', workerId: 'engine-2' });
    await sidecar.next('adopted');
    sidecar.send({});
    // Its own mapping and descriptor, and the agent's duplicate of the descriptor for each of the 4 banks.
    expect(await sidecar.next('state')).toMatchObject({ engines: 1, mappings: 1, descriptors: 5 });
    sidecar.send({ close: true });
    expect(await sidecar.next('withdrawn')).toMatchObject({ workerId: 'engine-2', pinsRevoked: 0, unmapped: true });
    await sidecar.next('closed');
  }, 180_000);

  it('the test engine adopts its memfd with its token sequences: a reader pins by kvreuse chain hashes and reads the engine’s bytes', async () => {
    const { path, store, socket, sidecar } = await startSidecar();
    const engine = startChild<{ event: 'adopted'; answer: { incarnation: string }; geometry: Geometry }>(
      'test/process/test-engine-adopting.ts',
      [socket, '64'],
      cleanups,
    );
    const { answer, geometry } = await engine.next('adopted');
    const adopted = await sidecar.next('adopted');
    const own: (() => Promise<unknown>)[] = [];
    cleanups.push(async () => {
      for (const cleanup of own.reverse()) await cleanup();
    });
    const secret = openClusterSecret({ backend: 'sqlite', sqlitePath: path, secretFile: '' });
    const spec = {
      workerId: 'prefill-0',
      role: 'prefill' as const,
      tpSize: 1,
      backend: 'ucx' as const,
      secret,
      geometry,
    };
    const prefill = await openWorker(store, spec, own);
    await start(prefill);
    await allReady(prefill);
    const reader = prefill.ranks[0]!;
    const watch = await watchWorkerReadiness(store, 'test-engine-0', { onChange: () => {} });
    cleanups.push(() => watch.close());
    await vi.waitFor(() => expect(watch.current.ready).toBe(true), { timeout: 60_000, interval: 10 });

    const tokens = Array.from({ length: 64 }, (_, i) => i);
    const source = { workerId: 'test-engine-0', incarnation: answer.incarnation, epoch: adopted['epoch'] as number };
    const hashes = hashBlockChain(tokens, blockHashScheme(geometry, ''));
    const receipt = await reader.endpoint.pull({
      hint: hintFor(source, 4, { hashes, blockTokens: geometry.blockTokens }),
      destinationBlocks: Uint32Array.of(3, 2, 1, 0),
    });
    expect(receipt).toMatchObject({ requested: 4, blocks: 4, checkedBlocks: 4, recomputed: { reasons: [] } });
    // The engine fills a block with the SHA-256 of its vLLM hash, repeated: block i landed in slot 3 - i.
    let parent = noneHash('0');
    const bank = reader.allocations[0]!.view();
    for (let i = 0; i < 4; i++) {
      parent = blockHash(parent, tokens.slice(16 * i, 16 * i + 16), null);
      const pattern = createHash('sha256').update(parent).digest();
      const landed = bank.subarray((3 - i) * 256, (4 - i) * 256);
      expect(Buffer.compare(landed, Buffer.concat(Array.from({ length: 8 }, () => pattern)))).toBe(0);
    }
  }, 180_000);

  it('refuses a second connection adopting a worker rank and incarnation already served, and keeps serving the first', async () => {
    const { store, socket, sidecar } = await startSidecar();
    const layout = {
      workerId: 'engine-twin',
      incarnation: 'engine-twin-1',
      geometry: testGeometry,
      blocks: BLOCKS,
    };
    const end = layoutRankBanks(
      testGeometry,
      { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 },
      { address: 0n, blocks: BLOCKS },
    ).at(-1)!;
    const adoptAs = () => {
      const memory = FileMemory.create(Number(end.address + end.bytes));
      cleanups.push(() => memory.close());
      const client = transport.connectSidecar(socket);
      cleanups.push(() => client.close());
      return { client, adopt: () => client.adopt(memory.fd, layout) };
    };
    const first = adoptAs();
    expect(first.adopt()).toMatchObject({ type: 'adopted', workerId: 'engine-twin', incarnation: 'engine-twin-1' });
    expect(await sidecar.next('adopted')).toMatchObject({ workerId: 'engine-twin', incarnation: 'engine-twin-1' });

    const second = adoptAs();
    expect(second.adopt).toThrow(expect.objectContaining({ code: 'NOT_ALLOWED' }));
    const refused = await sidecar.next('refused');
    expect(refused).toMatchObject({
      reason: 'already-adopted',
      detail:
        'worker engine-twin incarnation engine-twin-1, rank tp 0 pp 0, is adopted by another connection, which serves it on',
    });
    sidecar.send({});
    expect(await sidecar.next('state')).toMatchObject({ engines: 1, mappings: 1 });
    const watch = await watchWorkerReadiness(store, 'engine-twin', { onChange: () => {} });
    cleanups.push(() => watch.close());
    await vi.waitFor(() => expect(watch.current.ready).toBe(true), { timeout: 60_000, interval: 10 });
    first.client.close();
    expect(await sidecar.next('withdrawn')).toMatchObject({
      workerId: 'engine-twin',
      banksReturned: 4,
      unmapped: true,
    });
    // Withdrawn, the rank can be adopted again.
    expect(second.adopt()).toMatchObject({ type: 'adopted', workerId: 'engine-twin', incarnation: 'engine-twin-1' });
    expect(await sidecar.next('adopted')).toMatchObject({ workerId: 'engine-twin', incarnation: 'engine-twin-1' });
  }, 120_000);

  it('refuses malformed and unsupported messages with their reasons, and runs on', async () => {
    const { socket, sidecar } = await startSidecar();
    const client = transport.connectSidecar(socket);
    cleanups.push(() => client.close());
    const layout = { workerId: 'engine-1', geometry: testGeometry, blocks: BLOCKS };
    const refusedWith = (message: object | Uint8Array, fds: number[] = []) => {
      client.send(message, fds);
      return client.receive().reason;
    };
    expect(refusedWith(Buffer.from('not json'))).toBe('malformed-json');
    expect(refusedWith({ type: 'hello' })).toBe('unknown-type');
    expect(refusedWith({ type: 'adopt', version: 2, layout })).toBe('unsupported-version');
    expect(refusedWith({ type: 'adopt', layout })).toBe('missing-memfd');
    const gpu = { ...layout, memory: 'vram', device: 0, ipcHandle: Buffer.alloc(64).toString('base64') };
    expect(refusedWith({ type: 'adopt', layout: { ...gpu, ipcHandle: 'AAAA' } })).toBe('bad-ipc-handle');
    // This sidecar was given no admission gate: it serves no GPU memory.
    expect(refusedWith({ type: 'adopt', layout: gpu })).toBe('vram-not-supported');
    expect(refusedWith({ type: 'blocks', stored: [{ block: 0, hash: '0x10' }] })).toBe('not-adopted');
    expect(refusedWith({ type: 'blocks', stored: [{ block: 0, hash: 16 }] })).toBe('bad-blocks');
    const small = FileMemory.create(4096);
    cleanups.push(() => small.close());
    expect(refusedWith({ type: 'adopt', layout }, [small.fd])).toBe('too-small');
    expect(refusedWith({ type: 'adopt', layout: { ...layout, geometry: { numLayers: 0 } } }, [small.fd])).toBe(
      'bad-layout',
    );
    expect(refusedWith({ type: 'adopt', layout }, [small.fd, small.fd])).toBe('unexpected-fds');
    // A file that can shrink under a reader's copy (a plain file: no seals).
    const plain = openSync(join(dirname(socket), 'plain'), 'w+');
    cleanups.push(() => closeSync(plain));
    ftruncateSync(plain, 1 << 20);
    expect(() => client.adopt(plain, layout)).toThrow(expect.objectContaining({ code: 'NOT_ALLOWED' }));
    const reported = [
      'malformed-json',
      'unknown-type',
      'unsupported-version',
      'missing-memfd',
      'bad-ipc-handle',
      'vram-not-supported',
      'not-adopted',
      'bad-blocks',
      'too-small',
      'bad-layout',
      'unexpected-fds',
      'bad-memfd',
    ];
    for (const reason of reported) expect(await sidecar.next('refused')).toMatchObject({ reason });

    sidecar.send({});
    expect(await sidecar.next('state')).toMatchObject({ engines: 0, mappings: 0, descriptors: 0 });
  }, 120_000);
});
