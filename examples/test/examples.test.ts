// Runs each example as a user would (`node examples/<name>.mjs`, the packages resolved as installed)
// and checks what it printed and how it exited.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { loadTransport } from '@kvreuse/native-bindings';
import { describe, expect, it } from 'vitest';

// Like the packages' UCX tests: skipped where UCX is not built, except under CI, which requires it.
const inCi = !['', '0', 'false', undefined].includes(process.env['CI']);
const ucxBuilt = loadTransport().capabilities().backends.includes('ucx');

interface Run {
  readonly exit: number | string;
  readonly stdout: string;
  readonly stderr: string;
}

function runExample(file: string): Promise<Run> {
  const child = spawn(process.execPath, [fileURLToPath(new URL(`../${file}`, import.meta.url))], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ exit: code ?? (signal as string), stdout, stderr }));
  });
}

/** What both examples print once the prefill worker pulled the 6 retained blocks and both workers stopped. */
const pulledAndStopped = [
  /^prefill-0 pulled 6 of 6 blocks \(44,040,192 bytes\) in [\d.]+ ms, 6 checksums verified$/m,
  /^ {2}6 of 6 blocks hold exactly the decode worker's KV content$/m,
  /^ {2}recompute 0 blocks$/m,
  /^prefill-0 drained: 56 banks handed back, 0 retained, 0 pins waited for; agent closed$/m,
  /^decode-0 drained: 56 banks handed back, 0 retained, 0 pins waited for; agent closed$/m,
];

describe('examples', () => {
  it('loopback-memory.mjs: two workers in one process pull, verify and stop cleanly', async () => {
    const run = await runExample('loopback-memory.mjs');
    expect(run.stderr).toBe('');
    expect(run.exit).toBe(0);
    expect(run.stdout).toMatch(/^decode-0 and prefill-0 ready \(epochs \d+ and \d+\)$/m);
    for (const line of pulledAndStopped) expect(run.stdout).toMatch(line);
  }, 120_000);

  it.skipIf(!inCi && !ucxBuilt)(
    'ucx-sqlite.mjs: two processes over UCX and SQLite pull, verify and stop cleanly',
    async () => {
      const run = await runExample('ucx-sqlite.mjs');
      expect(run.stderr).toBe('');
      expect(run.exit).toBe(0);
      const decodePid = /^decode-0 ready in process (\d+)$/m.exec(run.stdout)?.[1];
      const prefillPid = /^prefill-0 ready in process (\d+);/m.exec(run.stdout)?.[1];
      expect(decodePid).toBeDefined();
      expect(prefillPid).toBeDefined();
      expect(decodePid).not.toBe(prefillPid);
      for (const line of pulledAndStopped) expect(run.stdout).toMatch(line);
      expect(run.stdout).toMatch(/^decode process exited with 0$/m);
    },
    120_000,
  );
});
