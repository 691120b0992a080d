import { fstatSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { agentName, testedBackends, transport } from '../test/support/backends.js';
import { HandleClosedError, InvalidArgumentError, NativeTransportError } from './errors.js';
import { FileMemory } from './file-memory.js';

const PAGE = 4096;

describe('FileMemory', () => {
  it('is zeroed shared memory of its own memfd, written through its view, closed once', () => {
    const memory = FileMemory.create(4 * PAGE);
    expect(memory.view().every((byte) => byte === 0)).toBe(true);
    memory.view().fill(0x5a);
    expect(memory.view()[4 * PAGE - 1]).toBe(0x5a);
    expect(memory.range()).toEqual({ address: memory.address, bytes: 4 * PAGE, file: { fd: memory.fd, offset: 0 } });
    memory.close();
    expect(() => memory.view()).toThrow(HandleClosedError);
  });

  it('does nothing on a second close, leaving a descriptor opened since alone', () => {
    const memory = FileMemory.create(PAGE);
    memory.close();
    const later = FileMemory.create(PAGE);
    expect(() => memory.close()).not.toThrow();
    expect(fstatSync(later.fd).size).toBe(PAGE);
    later.view().fill(0x5a);
    later.close();
  });

  it('refuses a size that is not a positive safe integer', () => {
    expect(() => FileMemory.create(0)).toThrow(InvalidArgumentError);
    expect(() => FileMemory.create(1.5)).toThrow(InvalidArgumentError);
  });
});

describe.each(testedBackends)('registering file memory on %s', (backend) => {
  it('registers a range with its file, which the agent keeps open past the caller closing its fd', async () => {
    const agent = await transport.createAgent({ name: agentName('file-register'), backend });
    const memory = FileMemory.create(4 * PAGE);
    const region = agent.register({
      address: memory.address + BigInt(PAGE),
      bytes: 2 * PAGE,
      file: { fd: memory.fd, offset: PAGE },
    });
    expect(region).toMatchObject({ address: memory.address + BigInt(PAGE), bytes: 2 * PAGE, kind: 'dram' });
    expect(agent.counters()).toMatchObject({ liveRegistrations: 1, registeredBytes: 2 * PAGE });
    await region.deregister();
    memory.close();
    await agent.close();
  });

  it('refuses a file that is not what the range maps, naming why', async () => {
    const agent = await transport.createAgent({ name: agentName('file-refusals'), backend });
    const memory = FileMemory.create(4 * PAGE);
    expect(() => agent.register({ ...memory.range(), file: { fd: memory.fd, offset: PAGE } })).toThrow(
      expect.objectContaining({
        code: 'INVALID_PARAM',
        call: 'kvt_mem_register_fd',
        detail: expect.stringContaining('exceeds the 16384 bytes'),
      }),
    );
    expect(() =>
      agent.register({ address: memory.address, bytes: PAGE, file: { fd: memory.fd, offset: PAGE } }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_PARAM', detail: expect.stringContaining('maps offset 0') }));
    expect(() => agent.register({ ...memory.range(), file: { fd: -1 } })).toThrow(InvalidArgumentError);
    expect(() => agent.register({ ...memory.range(), file: { fd: memory.fd, offset: -1 } })).toThrow(
      InvalidArgumentError,
    );
    expect(() => agent.register({ ...memory.range(), kind: 'vram', file: { fd: memory.fd } })).toThrow(
      InvalidArgumentError,
    );
    expect(() => agent.register({ ...memory.range(), file: { fd: 0x7fff_fff0 } })).toThrow(NativeTransportError);
    expect(agent.counters().liveRegistrations).toBe(0);
    memory.close();
    await agent.close();
  });
});
