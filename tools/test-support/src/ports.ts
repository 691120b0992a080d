// Ports for servers that a test starts on a port it names, and may start again on the same one. A port the
// kernel once handed out (bind to port 0) and that was closed again can be handed to any other socket before
// the server binds it, an outgoing connection's included: such a port is not reserved for anyone. These come
// from below the kernel's ephemeral range, which it never hands out itself, and each is claimed across the
// processes that use this module, so that two of them never take the same one.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The lowest port handed out; below it lie the ports the system's own services listen on. */
const LOWEST_PORT = 10_000;
const ATTEMPTS = 1_000;
/** In the repository's test results (emptied when `npm test` starts), which every project of a run shares: a run's
 * temporary folder is its project's own. */
export const portClaims = fileURLToPath(new URL('../../../.test-results/ports', import.meta.url));
/** The ports this process claimed. */
const ours = new Set<number>();

/** The first port of the kernel's ephemeral range (32768 where /proc does not say). */
function ephemeralFloor(): number {
  try {
    const floor = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(floor) && floor > 0 ? floor : 32_768;
  } catch {
    return 32_768;
  }
}

/** Whether nothing listens on `port` of 127.0.0.1 now. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Claims `port` for this process: a file `<port>.<pid>` of its own, then a look at the others' claims of the port.
 * A claim is kept only when no other live process's claim of the port is there: of two processes that claim a port
 * at once, the later to look sees the other's claim, so at most one keeps it. Claims of processes that ended are
 * removed; a claim ends with its process.
 */
function claim(port: number): boolean {
  if (ours.has(port)) return false;
  const mine = `${port}.${process.pid}`;
  writeFileSync(join(portClaims, mine), '');
  for (const file of readdirSync(portClaims)) {
    const [claimed, pid] = file.split('.').map(Number);
    if (claimed !== port || file === mine) continue;
    if (alive(pid as number)) {
      rmSync(join(portClaims, mine), { force: true });
      return false;
    }
    rmSync(join(portClaims, file), { force: true });
  }
  ours.add(port);
  return true;
}

function release(port: number): void {
  ours.delete(port);
  rmSync(join(portClaims, `${port}.${process.pid}`), { force: true });
}

/** Ports from `lowest` up to, not including, `ceiling`. */
export interface PortRange {
  readonly lowest: number;
  readonly ceiling: number;
}

/** From 10,000 up to the kernel's ephemeral range. */
export function portsBelowEphemeral(): PortRange {
  return { lowest: LOWEST_PORT, ceiling: ephemeralFloor() };
}

/**
 * The first of `count` consecutive loopback ports of `range` that nothing listens on, claimed for this process until
 * it ends. Throws, naming the range, when no such run was found in 1,000 tries.
 */
export async function reservePorts(count: number, range: PortRange = portsBelowEphemeral()): Promise<number> {
  mkdirSync(portClaims, { recursive: true });
  const { lowest, ceiling } = range;
  for (let attempt = 0; attempt < ATTEMPTS && ceiling - lowest >= count; attempt++) {
    const first = lowest + Math.floor(Math.random() * (ceiling - lowest - count + 1));
    const ports = Array.from({ length: count }, (_, i) => first + i);
    const claimed: number[] = [];
    for (const port of ports) {
      if (!claim(port)) break;
      claimed.push(port);
    }
    if (claimed.length === count && (await Promise.all(ports.map(portIsFree))).every(Boolean)) return first;
    claimed.forEach(release);
  }
  throw new Error(`no ${count} consecutive ports free and unclaimed in ${lowest}-${ceiling - 1} (${ATTEMPTS} tries)`);
}
