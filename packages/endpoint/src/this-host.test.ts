// The host a rank publishes by default: the boot id and the IPC and pid namespaces of the process, told apart
// across real namespaces (a child under `unshare`, as a pod on the same node runs).
import { execFile } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { thisHost } from './this-host.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const inCi = !['', '0', 'false', undefined].includes(process.env['CI']);

/** `thisHost()` as a child process run under `launcher` computes it. */
async function thisHostOfChild(launcher: readonly string[]): Promise<string> {
  const script = "import('./src/this-host.ts').then(({ thisHost }) => console.log(thisHost()))";
  const command = [process.execPath, '--import', 'tsx', '--input-type=module', '-e', script];
  const [file, ...args] = [...launcher, ...command];
  const { stdout } = await promisify(execFile)(file!, args, { cwd: packageDir });
  return stdout.trim();
}

describe('thisHost', () => {
  it('is the boot id, then the IPC and pid namespaces of this process', () => {
    const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const ipc = readlinkSync('/proc/self/ns/ipc');
    const pid = readlinkSync('/proc/self/ns/pid');
    expect(ipc).toMatch(/^ipc:\[\d+\]$/);
    expect(pid).toMatch(/^pid:\[\d+\]$/);
    expect(thisHost()).toBe(`${bootId}/${ipc}/${pid}`);
  });

  it('is the same for another process in these namespaces', async () => {
    expect(await thisHostOfChild([])).toBe(thisHost());
  }, 60_000);

  it.runIf(process.getuid?.() === 0 || inCi)(
    'differs for a process with namespaces of its own (a pod on this node), on the same machine',
    async () => {
      const ours = thisHost()!;
      const bootId = ours.split('/')[0]!;
      const pod = await thisHostOfChild(['unshare', '--ipc', '--pid', '--fork', '--mount-proc']);
      expect(pod).toMatch(new RegExp(`^${bootId}/ipc:\\[\\d+\\]/pid:\\[\\d+\\]$`));
      expect(pod.split('/').slice(1)).not.toContain(ours.split('/')[1]);
      expect(pod.split('/').slice(1)).not.toContain(ours.split('/')[2]);
      // A container that shares the IPC namespace but not the pid one (its vram moves host-staged) differs too.
      const container = await thisHostOfChild(['unshare', '--pid', '--fork', '--mount-proc']);
      expect(container.split('/').slice(0, 2)).toEqual(ours.split('/').slice(0, 2));
      expect(container).not.toBe(ours);
    },
    60_000,
  );
});
