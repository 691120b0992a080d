import { readFileSync, readlinkSync } from 'node:fs';

/** What `readText` reads, trimmed; undefined when it throws or reads nothing. */
function readOrUndefined(readText: () => string): string | undefined {
  try {
    return readText().trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The host a rank publishes unless it is given one: where this process shares memory with others. The kernel's boot
 * id (the same for every process and container on one machine, new at every boot) followed by this process's IPC
 * and pid namespaces, e.g. `4c1d…/ipc:[4026531839]/pid:[4026531836]`. Processes that publish the same host map each
 * other's memory (and open each other's CUDA IPC handles); pods on one node, each with namespaces of its own, reach
 * each other through the network, and so publish different hosts. Undefined without a boot id (not Linux).
 */
export function thisHost(): string | undefined {
  const bootId = readOrUndefined(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8'));
  if (bootId === undefined) return undefined;
  const namespaces = ['ipc', 'pid'].map((kind) => readOrUndefined(() => readlinkSync(`/proc/self/ns/${kind}`)));
  return [bootId, ...namespaces.filter((namespace) => namespace !== undefined)].join('/');
}
