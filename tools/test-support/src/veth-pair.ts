// Two hosts on one machine: two network namespaces joined by a veth pair, each end with an address,
// for tests and benchmarks that must cross a network rather than shared memory. Needs root and
// iproute2's `ip`. Every namespace is named after the process that made it, so a later run removes
// what a crashed or killed one left behind.
import { spawnSync } from 'node:child_process';

const PREFIX = 'kvreuse-veth-';
/** The veth's name inside either namespace (each namespace has its own set of names). */
const DEVICE = 'veth-kvreuse';
/** Each pair is a network of its own, so every pair can use the same two addresses. */
const ADDRESSES = { a: '10.77.0.1', b: '10.77.0.2' } as const;
const PREFIX_LENGTH = 30;
/** How long the veth may take to report its link up (the kernel sets it asynchronously). */
const LINK_UP_DEADLINE_MS = 10_000;

export interface NamespaceEnd {
  /** The namespace's name, as `ip netns` knows it. */
  readonly name: string;
  /** The address of this end of the veth. */
  readonly address: string;
  /** The command prefix that runs a program inside this namespace (`ip netns exec <name>`, which execs it). */
  readonly launcher: readonly string[];
}

export interface VethPair {
  readonly a: NamespaceEnd;
  readonly b: NamespaceEnd;
  /** The veth's interface name, the same in both namespaces. */
  readonly device: string;
  /** Deletes both namespaces (and with them the veth); idempotent. */
  close(): void;
}

function whyNamespacesCannotBeMade(): string | undefined {
  const ipVersion = spawnSync('ip', ['-V'], { encoding: 'utf8' });
  if (ipVersion.error !== undefined) return `iproute2's ip cannot be run (${ipVersion.error.message})`;
  // A container may run as root without the capability; try one namespace that vanishes with `true`.
  const probe = spawnSync('unshare', ['--net', 'true'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) {
    return `creating a network namespace is not permitted here (it needs root, CAP_SYS_ADMIN): ${probe.error?.message ?? probe.stderr.trim()}`;
  }
  return undefined;
}

let unavailable: { readonly why: string | undefined } | undefined;

/** Why network namespaces cannot be made here (not root, no `ip`), or undefined where they can; asked once per process. */
export function vethPairsUnavailable(): string | undefined {
  unavailable ??= { why: whyNamespacesCannotBeMade() };
  return unavailable.why;
}

function ip(args: readonly string[]): string {
  const run = spawnSync('ip', args, { encoding: 'utf8' });
  if (run.error !== undefined) throw new Error(`ip ${args.join(' ')}: ${run.error.message}`);
  if (run.status !== 0) throw new Error(`ip ${args.join(' ')} exited with ${run.status}: ${run.stderr.trim()}`);
  return run.stdout;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Deletes the namespaces of this prefix whose creating process is gone (a crashed or killed run). */
function removeLeftovers(): void {
  for (const line of ip(['netns', 'list']).split('\n')) {
    const name = line.split(' ')[0] ?? '';
    const owner = new RegExp(`^${PREFIX}(\\d+)-\\d+-[ab]$`).exec(name)?.[1];
    if (owner !== undefined && !isAlive(Number(owner))) ip(['netns', 'delete', name]);
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Waits until the kernel reports the veth's link up in `namespace` (UCX skips interfaces that are not running). */
function awaitLinkUp(namespace: string): void {
  const deadline = Date.now() + LINK_UP_DEADLINE_MS;
  for (;;) {
    const link = ip(['-n', namespace, '-o', 'link', 'show', 'dev', DEVICE]);
    if (/\bstate UP\b/.test(link)) return;
    if (Date.now() > deadline)
      throw new Error(`the veth in ${namespace} is not up after ${LINK_UP_DEADLINE_MS} ms: ${link.trim()}`);
    sleepSync(10);
  }
}

const open = new Set<VethPair>();
let sequence = 0;
process.on('exit', () => {
  for (const pair of [...open]) pair.close();
});

/**
 * Two fresh network namespaces `a` and `b`, joined by a veth pair with ADDRESSES on its ends, loopback
 * and veth up. Close it when done; namespaces still open when the process exits are deleted then, and
 * those of a process that was killed are deleted by the next pair opened on the machine.
 */
export function openVethPair(): VethPair {
  const why = vethPairsUnavailable();
  if (why !== undefined) throw new Error(`two network namespaces joined by a veth pair cannot be made: ${why}`);
  removeLeftovers();
  sequence += 1;
  const names = { a: `${PREFIX}${process.pid}-${sequence}-a`, b: `${PREFIX}${process.pid}-${sequence}-b` };
  const made: string[] = [];
  const close = () => {
    for (const name of made.splice(0)) ip(['netns', 'delete', name]);
    open.delete(pair);
  };
  const end = (side: 'a' | 'b'): NamespaceEnd => ({
    name: names[side],
    address: ADDRESSES[side],
    launcher: ['ip', 'netns', 'exec', names[side]],
  });
  const pair: VethPair = { a: end('a'), b: end('b'), device: DEVICE, close };
  open.add(pair);
  try {
    for (const side of ['a', 'b'] as const) {
      ip(['netns', 'add', names[side]]);
      made.push(names[side]);
    }
    ip(['link', 'add', 'name', DEVICE, 'netns', names.a, 'type', 'veth', 'peer', 'name', DEVICE, 'netns', names.b]);
    for (const side of ['a', 'b'] as const) {
      ip(['-n', names[side], 'address', 'add', `${ADDRESSES[side]}/${PREFIX_LENGTH}`, 'dev', DEVICE]);
      ip(['-n', names[side], 'link', 'set', 'lo', 'up']);
      ip(['-n', names[side], 'link', 'set', DEVICE, 'up']);
    }
    awaitLinkUp(names.a);
    awaitLinkUp(names.b);
  } catch (error) {
    close();
    throw error;
  }
  return pair;
}

/** UCX settings that keep a process on tcp over the pair's veth: no shared memory, no other interface. */
export function tcpOverVeth(pair: VethPair): NodeJS.ProcessEnv {
  return { UCX_TLS: 'tcp', UCX_NET_DEVICES: pair.device };
}
