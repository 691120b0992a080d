import { describe, expect, it } from 'vitest';
import { composed, machineCapabilities, settingsFor, vramCapabilities, workerOf, workersOf } from '../test/support.js';
import { builtInProfile } from './built-in.js';
import { admissionGate } from './gate.js';

const qwen = builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed });
const llama70b = builtInProfile('llama-3.1-70b-bf16-b64', { settings: composed });

describe('admissionGate', () => {
  it('passes a worker the profile admits, named after the profile', async () => {
    const gate = admissionGate(qwen, {
      composition: composed,
      capabilities: machineCapabilities,
      settings: settingsFor(qwen),
    });
    expect(gate.name).toBe('profile qwen3-0.6b-bf16-b64');
    for (const worker of workersOf(qwen)) expect(await gate.evaluate(worker)).toEqual({ pass: true });
  });

  it('fails a worker that contradicts the profile with every admission reason', async () => {
    const gate = admissionGate(qwen, {
      composition: composed,
      capabilities: machineCapabilities,
      settings: settingsFor(qwen),
    });
    const tp1 = workerOf({ role: 'decode', geometry: { ...qwen.geometry, blockTokens: 16 }, tpSize: 1 });
    expect(await gate.evaluate(tp1)).toEqual({
      pass: false,
      reason:
        'worker decode-1: roles.decode.tpSize: expected 2, actual 1; worker decode-1: geometry.blockTokens: expected 64, actual 16',
    });
  });

  it('fails every worker when a process-wide fact contradicts the profile: another hash function, or no vram', async () => {
    const [decode] = workersOf(qwen);
    const otherHash = admissionGate(qwen, {
      composition: composed,
      capabilities: machineCapabilities,
      settings: settingsFor(qwen),
      blockHashFunction: 'kvreuse.block-hash.v1',
    });
    expect(await otherHash.evaluate(decode!)).toMatchObject({
      pass: false,
      reason: expect.stringMatching(
        /^blockHash\.function: expected "kvreuse\.block-hash\.v3", actual "kvreuse\.block-hash\.v1"/,
      ),
    });
    const [gpuDecode] = workersOf(llama70b);
    const gpu = admissionGate(llama70b, {
      composition: composed,
      capabilities: machineCapabilities,
      settings: settingsFor(llama70b),
    });
    expect(await gpu.evaluate(gpuDecode!)).toMatchObject({
      pass: false,
      reason: expect.stringContaining(
        'nativeCapabilities: expected "vram", actual "no: no driver library: libcuda.so.1 could not be loaded',
      ),
    });
    const capable = admissionGate(llama70b, {
      composition: composed,
      capabilities: vramCapabilities,
      settings: settingsFor(llama70b),
    });
    expect(await capable.evaluate(gpuDecode!)).toEqual({ pass: true });
  });

  it('checks the profile and the context when it is made', () => {
    const settings = settingsFor(qwen);
    expect(() =>
      admissionGate({ ...qwen, version: 0 } as never, {
        composition: composed,
        capabilities: machineCapabilities,
        settings,
      }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_PROFILE' }));
    expect(() => admissionGate(qwen, undefined as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'context' }),
    );
    expect(() => admissionGate(qwen, { composition: composed, capabilities: {} as never, settings })).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'context.capabilities' }),
    );
    expect(() =>
      admissionGate(qwen, { composition: composed, capabilities: machineCapabilities, settings: null as never }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'context.settings' }));
  });

  it('refuses a block hash function that is no string when it is made, not at every worker it evaluates', () => {
    const context = { composition: composed, capabilities: machineCapabilities, settings: settingsFor(qwen) };
    expect(() => admissionGate(qwen, { ...context, blockHashFunction: 3 as never })).toThrow(
      expect.objectContaining({
        code: 'INVALID_ADMISSION_INPUT',
        argument: 'context.blockHashFunction',
        message: 'context.blockHashFunction = 3 is refused: must be a string when given',
      }),
    );
  });
});
