// Stops a process for a test that needs it to answer nothing, and waits until it really cannot.
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** The state letter of each thread of `pid` (R, S, D, T, Z …); a thread gone since the listing reads X. */
export function threadStates(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      return 'X';
    }
    return stat.charAt(stat.lastIndexOf(')') + 2);
  });
}

const cannotRun = (state: string) => state === 'T' || state === 'Z' || state === 'X';

/**
 * Sends SIGSTOP to `pid` and resolves once every one of its threads is stopped. `kill` returns as
 * soon as the signal is queued; the kernel stops the threads one by one as they are scheduled, and
 * until then the others run on: a frozen etcd answered a new watch in that window. Rejects, naming
 * the threads' states, if they have not all stopped within `timeoutMs`.
 */
export async function stopProcess(pid: number, timeoutMs = 10_000): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const states = threadStates(pid);
    if (states.every(cannotRun)) return;
    if (Date.now() > deadline) {
      throw new Error(`process ${pid} did not stop within ${timeoutMs} ms: its threads are ${states.join('')}`);
    }
    await sleep(1);
  }
}
