import { describe, expect, it } from 'vitest';
import { agentName, testedBackends, transport } from '../test/support/backends.js';
import { allZero, liveCounters } from '../test/support/pair.js';
import { HandleClosedError, InvalidArgumentError } from './errors.js';
import { type Allocation, VRAM_IPC_HANDLE_BYTES } from './memory.js';

const PAGE = 4096;

describe.each(testedBackends)('memory on %s', (backend) => {
  it('allocates page-aligned memory that can be filled through its view', async () => {
    const agent = await transport.createAgent({ name: agentName('alloc'), backend });
    const bank = await agent.allocate(3 * PAGE + 5);
    expect(bank.address % BigInt(PAGE)).toBe(0n);
    const view = bank.view();
    expect(view.length).toBe(3 * PAGE + 5);
    view.fill(0xab);
    expect(bank.view()[3 * PAGE + 4]).toBe(0xab);
    expect(agent.counters()).toMatchObject({ liveAllocations: 1, allocatedBytes: 3 * PAGE + 5 });
    await bank.free();
    expect(() => bank.view()).toThrow(HandleClosedError);
    await expect(bank.free()).rejects.toThrow(HandleClosedError);
    await agent.close();
  });

  it('writes host bytes into an allocation at an offset, refusing what would not fit', async () => {
    const agent = await transport.createAgent({ name: agentName('write'), backend });
    const bank = await agent.allocate(2 * PAGE);
    bank.write(Uint8Array.from([1, 2, 3]), PAGE - 1);
    expect([...bank.view().subarray(PAGE - 2, PAGE + 3)]).toEqual([0, 1, 2, 3, 0]);
    expect(() => bank.write(new Uint8Array(2), 2 * PAGE - 1)).toThrow(InvalidArgumentError);
    expect(() => bank.write(new Uint8Array(1), -1)).toThrow(InvalidArgumentError);
    await bank.free();
    expect(() => bank.write(new Uint8Array(1))).toThrow(HandleClosedError);
    await agent.close();
  });

  it('refuses to write what is not bytes, writing nothing', async () => {
    const agent = await transport.createAgent({ name: agentName('write-bytes'), backend });
    const bank = await agent.allocate(PAGE);
    bank.view().fill(7);
    for (const bytes of ['abc', [1, 2, 3], undefined, 42]) {
      expect(() => bank.write(bytes as unknown as Uint8Array)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'bytes' }),
      );
    }
    expect([...bank.view().subarray(0, 4)]).toEqual([7, 7, 7, 7]);
    await bank.free();
    await agent.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('registers and deregisters, counting registrations and bytes', async () => {
    const agent = await transport.createAgent({ name: agentName('register'), backend });
    const bank = await agent.allocate(16 * PAGE);
    const whole = agent.register(bank);
    expect(whole).toMatchObject({ address: bank.address, bytes: 16 * PAGE, kind: 'dram', device: 0 });
    expect(agent.counters()).toMatchObject({ liveRegistrations: 1, registeredBytes: 16 * PAGE });
    await expect(bank.free()).rejects.toMatchObject({ code: 'BUSY', call: 'kvt_mem_free' });
    expect(bank.isOpen).toBe(true);
    await whole.deregister();
    await expect(whole.deregister()).rejects.toThrow(HandleClosedError);
    const part = agent.register({ address: bank.address + BigInt(PAGE), bytes: 2 * PAGE });
    expect(agent.counters()).toMatchObject({ liveRegistrations: 1, registeredBytes: 2 * PAGE });
    await part.deregister();
    await bank.free();
    await agent.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('refuses zero sizes and malformed ranges before calling the library', async () => {
    const agent = await transport.createAgent({ name: agentName('zero'), backend });
    const nativeRefusals = () => transport.counters().errors.INVALID_PARAM;
    const before = nativeRefusals();
    try {
      await expect(agent.allocate(0)).rejects.toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'bytes', value: 0 }),
      );
      await expect(agent.allocate(0n)).rejects.toThrow(InvalidArgumentError);
      await expect(agent.allocate(PAGE, null as unknown as object)).rejects.toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'options' }),
      );
      expect(() => agent.register({ address: 0x1000n, bytes: 0 })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'bytes' }),
      );
      expect(() => agent.register(undefined as unknown as Allocation)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'memory' }),
      );
      expect(nativeRefusals()).toBe(before);
      expect(agent.counters()).toMatchObject({ liveAllocations: 0, liveRegistrations: 0 });
    } finally {
      await agent.close();
    }
  });

  it('refuses to register memory this process never mapped, naming the range', async () => {
    const agent = await transport.createAgent({ name: agentName('unmapped'), backend });
    try {
      expect(() => agent.register({ address: 12345, bytes: 4096 })).toThrow(
        expect.objectContaining({
          code: 'INVALID_PARAM',
          call: 'kvt_mem_register',
          detail: expect.stringContaining('is not mapped'),
        }),
      );
      expect(agent.counters().liveRegistrations).toBe(0);
    } finally {
      await agent.close();
    }
  });

  it('refuses overlap and vram, naming the problem', async () => {
    const agent = await transport.createAgent({ name: agentName('refuse'), backend });
    const bank = await agent.allocate(8 * PAGE);
    const first = agent.register({ address: bank.address, bytes: 4 * PAGE });
    try {
      expect(() => agent.register({ address: bank.address + BigInt(3 * PAGE), bytes: 2 * PAGE })).toThrow(
        expect.objectContaining({ code: 'INVALID_PARAM', detail: expect.stringContaining(String(first.id)) }),
      );
      if (!transport.capabilities().vram.supported) {
        expect(() => agent.register({ address: bank.address + BigInt(4 * PAGE), bytes: PAGE, kind: 'vram' })).toThrow(
          expect.objectContaining({ code: 'NOT_SUPPORTED', call: 'kvt_mem_register' }),
        );
      }
      expect(() => agent.register({ address: -1, bytes: PAGE })).toThrow(InvalidArgumentError);
      expect(() => agent.register({ address: bank.address, bytes: PAGE, kind: 'hbm' as 'dram' })).toThrow(
        InvalidArgumentError,
      );
      expect(agent.counters().errors.INVALID_PARAM).toBe(1);
    } finally {
      await first.deregister();
      await bank.free();
      await agent.close();
    }
  });

  it('refuses to open a CUDA IPC handle that is not 64 bytes, and a dram allocation has no handle', async () => {
    const agent = await transport.createAgent({ name: agentName('ipc'), backend });
    const bank = await agent.allocate(PAGE);
    try {
      expect(() => agent.openVramIpc(0, new Uint8Array(63))).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('handle') }),
      );
      expect(() => agent.openVramIpc(-1, new Uint8Array(VRAM_IPC_HANDLE_BYTES))).toThrow(InvalidArgumentError);
      expect(() => bank.ipcHandle()).toThrow(expect.objectContaining({ message: expect.stringContaining('dram') }));
      if (!transport.capabilities().vram.supported) {
        expect(() => agent.openVramIpc(0, new Uint8Array(VRAM_IPC_HANDLE_BYTES))).toThrow(
          expect.objectContaining({ code: 'NOT_SUPPORTED', call: 'kvt_mem_open_vram_ipc' }),
        );
      }
      expect(bank.imported).toBe(false);
    } finally {
      await bank.free();
      await agent.close();
    }
  });

  it('allocates locked memory or refuses with NOT_ALLOWED naming the limit', async () => {
    const agent = await transport.createAgent({ name: agentName('mlock'), backend });
    try {
      const bank = await agent.allocate(PAGE, { mlock: true });
      await bank.free();
    } catch (error) {
      expect(error).toMatchObject({ code: 'NOT_ALLOWED', call: 'kvt_mem_alloc' });
    } finally {
      await agent.close();
    }
  });
});
