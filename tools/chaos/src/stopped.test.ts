import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ChaosHangError } from './errors.js';
import { processState, untilStopped } from './stopped.js';

describe('a stopped process, from /proc', () => {
  it('reads the state after the command name, whatever the name holds', () => {
    expect(processState(process.pid)).toMatch(/^[RS]$/);
    expect(processState(2 ** 22 + 1)).toBeUndefined();
  });

  it('waits until a process is stopped, and names the step when it is not stopped in time', async () => {
    const child = spawn('sleep', ['30']);
    try {
      await expect(untilStopped(9, 'sleep stopped', child.pid as number, 50)).rejects.toThrow(ChaosHangError);
      setTimeout(() => child.kill('SIGSTOP'), 20);
      await untilStopped(9, 'sleep stopped', child.pid as number, 10_000);
      expect(processState(child.pid as number)).toBe('T');
    } finally {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });
});
