// The adoption sidecar's socket from Node: an engine's client and a listener in this one process (the
// client's adopt waits for its answer on this thread, so the answer is queued before it asks).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { transport } from '../test/support/backends.js';
import { NativeTransportError } from './errors.js';
import { FileMemory } from './file-memory.js';
import { libc } from './libc.js';
import type { SidecarEvent } from './sidecar-listener.js';

const PAGE = 4096;
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
});

/** A listener in a new temporary folder, and its events as a queue to await one by one; `react` sees each once queued. */
function listen(react?: (event: SidecarEvent) => void) {
  const directory = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-'));
  cleanups.push(() => rmSync(directory, { recursive: true, force: true }));
  const events: SidecarEvent[] = [];
  let wake: (() => void) | undefined;
  const path = join(directory, 'sidecar.sock');
  const listener = transport.listenSidecar(path, (event) => {
    events.push(event);
    wake?.();
    react?.(event);
  });
  cleanups.push(() => listener.close());
  const next = async (): Promise<SidecarEvent> => {
    while (events.length === 0) await new Promise<void>((resolve) => (wake = resolve));
    return events.shift() as SidecarEvent;
  };
  return { path, listener, next };
}

describe('the adoption sidecar socket', () => {
  it('hands an engine’s memfd to the listener, which maps the same pages and leaves the engine’s own alone', async () => {
    const { path, listener, next } = listen();
    const engine = transport.connectSidecar(path);
    expect(await next()).toMatchObject({ kind: 'connected', pid: process.pid });
    const memory = FileMemory.create(4 * PAGE);
    cleanups.push(() => memory.close());
    memory.view().fill(0x5a);
    engine.send({ type: 'adopt', version: 1 }, [memory.fd]);
    const message = await next();
    expect(message.kind).toBe('message');
    if (message.kind !== 'message') return;
    expect(JSON.parse(message.data.toString('utf8'))).toEqual({ type: 'adopt', version: 1 });
    expect(message.fds).toHaveLength(1);
    const adopted = FileMemory.map(message.fds[0] as number);
    expect(adopted.bytes).toBe(4 * PAGE);
    memory.view()[PAGE] = 0xa5;
    expect([adopted.view()[0], adopted.view()[PAGE]]).toEqual([0x5a, 0xa5]);
    adopted.close();
    expect(memory.view()[PAGE]).toBe(0xa5); // the engine's mapping and memfd are untouched

    listener.send(message.connection, '{"type":"adopted","version":1}');
    expect(engine.adopt(memory.fd, { bytes: 4 * PAGE })).toEqual({ type: 'adopted', version: 1 });
    expect((await next()).kind).toBe('message');
    engine.close();
    const closed = await next();
    expect(closed).toEqual({ kind: 'closed', connection: message.connection });
    listener.close();
    expect(existsSync(path)).toBe(false);
  });

  it('goes on after an onEvent that throws: the warning names it, and the next events are handed over', async () => {
    const { path, next } = listen((event) => {
      if (event.kind === 'connected') throw new Error('the engine table is full');
    });
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    cleanups.push(() => process.off('warning', onWarning));
    const engine = transport.connectSidecar(path);
    cleanups.push(() => engine.close());
    engine.send({ type: 'blocks', version: 1 });
    expect((await next()).kind).toBe('connected');
    expect((await next()).kind).toBe('message');
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings).toEqual([expect.stringContaining('onEvent threw: the engine table is full')]);
  });

  it('answers a refusal as NOT_ALLOWED carrying it; the client refuses a message too large before sending it', async () => {
    const { path, listener, next } = listen();
    const engine = transport.connectSidecar(path);
    cleanups.push(() => engine.close());
    const { connection } = await next();
    listener.send(connection, '{"type":"refused","reason":"bad-layout","message":"no geometry"}');
    const memory = FileMemory.create(PAGE);
    cleanups.push(() => memory.close());
    expect(() => engine.adopt(memory.fd, {})).toThrow(expect.objectContaining({ code: 'NOT_ALLOWED' }));
    await next(); // the adopt message itself
    expect(() => engine.send(new Uint8Array(65537))).toThrow(expect.objectContaining({ code: 'INVALID_PARAM' }));
  });

  it('refuses a timeout that is not a uint32 of milliseconds instead of waiting forever (-1) or not at all (NaN)', async () => {
    const { path, listener, next } = listen();
    const engine = transport.connectSidecar(path);
    cleanups.push(() => engine.close());
    const { connection } = await next();
    // Queued before each wait, so that a wait the client did not refuse returns at once instead of hanging.
    listener.send(connection, '{"type":"adopted"}');
    for (const timeoutMs of [-1, NaN, 1.5, 2 ** 32, '10']) {
      expect(() => engine.receive(timeoutMs as number)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'timeoutMs' }),
      );
      expect(() => engine.adopt(undefined, {}, timeoutMs as number)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'timeoutMs' }),
      );
    }
    expect(engine.receive(0)).toEqual({ type: 'adopted' });
  });

  it('refuses descriptors that are not open-file numbers, and messages that are not bytes, sending nothing', async () => {
    const { path, listener, next } = listen();
    const engine = transport.connectSidecar(path);
    cleanups.push(() => engine.close());
    const { connection } = await next();
    const refused = (argument: string) => expect.objectContaining({ code: 'INVALID_ARGUMENT', argument });
    // NaN, 1.5 and a string's characters became descriptor 0 (this process's stdin), passed to the sidecar.
    expect(() => engine.send({ type: 'blocks' }, [NaN])).toThrow(refused('fds[0]'));
    expect(() => engine.send({ type: 'blocks' }, [1.5])).toThrow(refused('fds[0]'));
    expect(() => engine.send({ type: 'blocks' }, [-1])).toThrow(refused('fds[0]'));
    expect(() => engine.send({ type: 'blocks' }, '7' as never)).toThrow(refused('fds'));
    expect(() => engine.send(undefined as never)).toThrow(refused('message'));
    expect(() => listener.send(connection, 42 as never)).toThrow(refused('data'));
    expect(() => listener.send(connection, undefined as never)).toThrow(refused('data'));
    expect(() => listener.send(NaN, 'x')).toThrow(refused('connection'));
    // Nothing was sent either way: the next message each side sees is the one sent now.
    engine.send({ type: 'after' });
    expect(await next()).toMatchObject({ kind: 'message', data: Buffer.from('{"type":"after"}'), fds: [] });
    listener.send(connection, '{"type":"after"}');
    expect(engine.receive(0)).toEqual({ type: 'after' });
  });

  it('refuses an adopt whose memfd is not a descriptor or whose layout is not a plain object, sending nothing', async () => {
    const { path, next } = listen();
    const engine = transport.connectSidecar(path);
    cleanups.push(() => engine.close());
    await next();
    const refused = (argument: string) => expect.objectContaining({ code: 'INVALID_ARGUMENT', argument });
    // NaN and 1.5 became descriptor 0 or 1 (this process's stdin, stdout), passed to the sidecar.
    for (const memfd of [NaN, 1.5, -1, 2 ** 31, '3', null])
      expect(() => engine.adopt(memfd as number, { bytes: PAGE }, 0)).toThrow(refused('memfd'));
    for (const layout of [undefined, null, 'layout', 42, [PAGE], new Map()])
      expect(() => engine.adopt(undefined, layout as object, 0)).toThrow(refused('layout'));
    engine.send({ type: 'after' });
    expect(await next()).toMatchObject({ kind: 'message', data: Buffer.from('{"type":"after"}'), fds: [] });
  });

  it('refuses to map a memfd that may shrink, closing the descriptor it took', () => {
    const c = libc();
    const fd = c.memfd_create('unsealed', 0);
    expect(c.ftruncate(fd, BigInt(PAGE))).toBe(0);
    expect(() => FileMemory.map(fd)).toThrow(NativeTransportError);
    expect(c.fcntl(fd, 1, 0)).toBe(-1); // F_GETFD: closed
  });

  it('refuses a second listener on the same path, and a client where none listens', () => {
    const { path } = listen();
    expect(() => transport.listenSidecar(path, () => {})).toThrow(expect.objectContaining({ code: 'NOT_ALLOWED' }));
    expect(() => transport.connectSidecar(`${path}.none`)).toThrow(
      expect.objectContaining({ code: 'REMOTE_DISCONNECT' }),
    );
  });
});
