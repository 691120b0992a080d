import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { stopProcess, threadStates } from './stopped-process.js';

describe('stopProcess', () => {
  it('resolves once every thread of the process is stopped', async () => {
    // Node runs several threads (its platform workers, libuv's), which the kernel stops one by one.
    const child = spawn(process.execPath, ['-e', "console.log('ready'); setInterval(() => {}, 1000)"]);
    await once(child.stdout, 'data'); // its threads started before its script ran
    try {
      expect(threadStates(child.pid as number).length).toBeGreaterThan(1);
      await stopProcess(child.pid as number);
      expect(new Set(threadStates(child.pid as number))).toEqual(new Set(['T']));
    } finally {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });

  it('rejects for a process that is gone', async () => {
    const child = spawn('true');
    await once(child, 'exit');
    await expect(stopProcess(child.pid as number)).rejects.toMatchObject({ code: 'ESRCH' });
  });
});
