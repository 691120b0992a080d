import { readFileSync } from 'node:fs';
import { uptime } from 'node:os';

// Lease deadlines are CLOCK_MONOTONIC milliseconds, not wall-clock time. Every process on one
// machine reads the same CLOCK_MONOTONIC (it counts from boot and nothing sets it), so a deadline
// written by one process means the same instant to all the others, and a wall-clock step (NTP,
// an administrator, a VM resume correcting its time) cannot expire live leases en masse, nor keep
// dead ones alive. What the monotonic clock cannot survive is a reboot: it restarts near zero.
// So the file records which clock its deadlines are in (the boot id), and opening it under
// another clock drops every lease recorded under the old one — their processes did not survive
// the reboot either. A process stopped (SIGSTOP) past its lease finds the lease gone when it
// resumes, because the clock kept counting while it was stopped.
export const monotonicNow = (): number => Number(process.hrtime.bigint() / 1_000_000n);

/** The id of the clock lease deadlines are in: this boot's, by its Linux boot id where there is one. */
export function bootClockId(): string {
  try {
    return `boot:${readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()}`;
  } catch {
    // No Linux boot id: the boot time to the minute stands in for it.
    return `boot-time:${Math.round((Date.now() - uptime() * 1000) / 60_000)}`;
  }
}
