// A real etcd for the inspect and demo tests: the one `demo` starts for a run (src/local-etcd.ts), which
// a test can also freeze.
import { stopProcess } from '@kvreuse-internal/test-support';
import { startLocalEtcd } from '../src/local-etcd.js';

export interface RunningEtcd {
  readonly url: string;
  /** SIGSTOP, until none of its threads runs: its connections stay open and nothing answers. */
  pause(): Promise<void>;
  resume(): void;
  stop(): Promise<void>;
}

export async function startEtcd(): Promise<RunningEtcd> {
  const etcd = await startLocalEtcd({ command: 'test', env: process.env });
  return {
    url: etcd.url,
    stop: etcd.stop,
    pause: () => stopProcess(etcd.pid),
    resume: () => process.kill(etcd.pid, 'SIGCONT'),
  };
}
