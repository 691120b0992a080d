// Whether a process is stopped (SIGSTOP): its state in /proc/<pid>/stat is `T`. A rank that stops
// itself says so first and stops a moment later; a SIGCONT sent in that moment would be lost and leave
// it stopped for good, so the run waits for the state before it counts the stop or resumes the rank.
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { ChaosHangError } from './errors.js';

/** The state letter of `pid` (`R`, `S`, `T`, …), or undefined once the process is gone. */
export function processState(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // `pid (comm) state …`: comm may hold spaces and parentheses, so the state follows the last `)`.
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

/** Resolves once `pid` is stopped; ChaosHangError naming `step` for run `seed` if it is not within `timeoutMs`. */
export async function untilStopped(seed: number, step: string, pid: number, timeoutMs: number): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (processState(pid) !== 'T') {
    if (performance.now() > until) throw new ChaosHangError(seed, step, timeoutMs);
    await delay(1);
  }
}
