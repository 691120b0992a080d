// The command line of `kvreuse bench link`: which side this process is (it listens, or it connects to a
// listener), and for the connecting side what it measures.
import { isIP } from 'node:net';
import type { TransferDirection } from '@kvreuse/native-bindings';
import type { CommandArgs, OptionSpec } from '../args.js';
import { UsageError } from '../errors.js';
import { wholeNumberOption } from '../option-values.js';
import { dataOptions, documentFormatOf, type DocumentFormat } from '../output.js';

const command = 'bench link';

/** The port the listener waits on by default. */
export const defaultPort = 13_700;
const maxPort = 65_535;
/** The largest message: the listener allocates the largest size asked for, once. */
export const maxMessageBytes = 2 ** 30;
const defaultSizes = '4k,64k,1m,4m';
const defaultTimeoutS = 10;
/** The longest `--timeout`: a day. */
const maxTimeoutS = 86_400;
const directions: readonly TransferDirection[] = ['read', 'write'];

export const linkOptions: readonly OptionSpec[] = [
  { name: 'listen', description: 'wait for one peer to connect, serve its transfers, then exit' },
  { name: 'address', value: '<ip>', description: 'with --listen: the address to wait on (default 0.0.0.0)' },
  {
    name: 'port',
    value: '<port>',
    description: `with --listen: the TCP port to wait on (default ${defaultPort}; 0 takes a free one and prints it)`,
  },
  { name: 'connect', value: '<host:port>', description: 'measure the link to the peer listening there' },
  {
    name: 'sizes',
    value: '<list>',
    description: `message sizes, comma-separated, in bytes or with k, m or g (×1024, ×1024², ×1024³) (default ${defaultSizes})`,
  },
  { name: 'iterations', value: '<n>', description: 'measured messages per size and direction (default 1000)' },
  { name: 'warmup', value: '<n>', description: 'messages before the measured ones, not counted (default 100)' },
  {
    name: 'in-flight',
    value: '<n>',
    description: "messages posted and not yet complete at any time, as ucx_perftest's -O (default 1)",
  },
  {
    name: 'directions',
    value: '<list>',
    description: 'read (UCX get from the peer), write (UCX put to it), or both comma-separated (default read,write)',
  },
  {
    name: 'timeout',
    value: '<s>',
    description: `seconds to wait for the peer to connect, answer and complete each message (default ${defaultTimeoutS}; with --listen, default: wait for a peer until interrupted)`,
  },
  ...dataOptions,
];

/** What the listening side does. */
export interface ListenPlan {
  readonly role: 'listen';
  readonly address: string;
  readonly port: number;
  /** How long to wait for a peer to connect; undefined: until interrupted. */
  readonly connectTimeoutMs: number | undefined;
  /** How long a connected peer may take to send each message of the exchange. */
  readonly timeoutMs: number;
}

/** What the connecting side measures. */
export interface ConnectPlan {
  readonly role: 'connect';
  readonly host: string;
  readonly port: number;
  /** Message sizes in bytes, in the order given. */
  readonly sizes: readonly number[];
  readonly iterations: number;
  readonly warmup: number;
  readonly inFlight: number;
  readonly directions: readonly TransferDirection[];
  readonly timeoutMs: number;
  /** undefined: the table. */
  readonly format: DocumentFormat | undefined;
}

const units: Record<string, number> = { '': 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30 };

/** A message size: `4096`, `4k`, `64K`, `4m`, `1g` (binary multiples); a `UsageError` naming it otherwise. */
export function parseSize(text: string): number {
  const match = /^(\d+)([kmg]?)$/i.exec(text.trim());
  const bytes = match === null ? Number.NaN : Number(match[1]) * (units[match[2]!.toLowerCase()] ?? Number.NaN);
  if (!Number.isSafeInteger(bytes) || bytes < 1 || bytes > maxMessageBytes)
    throw new UsageError(
      command,
      `--sizes: ${JSON.stringify(text)} is not a message size from 1 byte to 1g (bytes, or a number with k, m or g)`,
    );
  return bytes;
}

/** Sizes from a comma-separated list; each at most once. */
export function parseSizes(list: string): number[] {
  const sizes = list.split(',').map(parseSize);
  const repeated = sizes.find((size, index) => sizes.indexOf(size) !== index);
  if (repeated !== undefined) throw new UsageError(command, `--sizes: ${repeated} bytes is given more than once`);
  return sizes;
}

/** `host:port` or `[v6 address]:port`. */
export function parsePeer(text: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]\s]+)):(\d+)$/.exec(text);
  const port = Number(match?.[3]);
  if (match === null || !Number.isInteger(port) || port < 1 || port > maxPort)
    throw new UsageError(
      command,
      `--connect is host:port (or [v6 address]:port) with a port from 1 to ${maxPort}, not ${JSON.stringify(text)}`,
    );
  return { host: match[1] ?? match[2]!, port };
}

function parseDirections(list: string): TransferDirection[] {
  const given = list.split(',').map((direction) => direction.trim());
  const unknown = given.find((direction) => !(directions as readonly string[]).includes(direction));
  if (unknown !== undefined || new Set(given).size !== given.length)
    throw new UsageError(command, `--directions is read, write or read,write, not ${JSON.stringify(list)}`);
  return directions.filter((direction) => given.includes(direction));
}

function refuseGiven(args: CommandArgs, names: readonly string[], why: string): void {
  const given = names.find((name) => args.options.has(name));
  if (given !== undefined) throw new UsageError(command, `--${given} ${why}`);
}

function optionText(args: CommandArgs, name: string): string | undefined {
  return args.options.get(name)?.[0];
}

/** `--address`: an IP address, which `listen` would otherwise look up as a host name. */
function listenAddressOf(args: CommandArgs): string {
  const address = optionText(args, 'address') ?? '0.0.0.0';
  if (isIP(address) === 0)
    throw new UsageError(
      command,
      `--address ${JSON.stringify(address)} is not an IP address of this host (an IPv4 or IPv6 address, such as 0.0.0.0)`,
    );
  return address;
}

function listenPlan(args: CommandArgs): ListenPlan {
  refuseGiven(args, ['sizes', 'iterations', 'warmup', 'in-flight', 'directions', 'output', 'json'], 'is for --connect');
  const timeoutS = wholeNumberOption(command, args, 'timeout', 0, 1, maxTimeoutS);
  return {
    role: 'listen',
    address: listenAddressOf(args),
    port: wholeNumberOption(command, args, 'port', defaultPort, 0, maxPort),
    connectTimeoutMs: timeoutS === 0 ? undefined : timeoutS * 1000,
    timeoutMs: (timeoutS === 0 ? defaultTimeoutS : timeoutS) * 1000,
  };
}

function connectPlan(args: CommandArgs, peer: string): ConnectPlan {
  refuseGiven(args, ['address', 'port'], 'is for --listen (the port of --connect is in host:port)');
  return {
    role: 'connect',
    ...parsePeer(peer),
    sizes: parseSizes(optionText(args, 'sizes') ?? defaultSizes),
    iterations: wholeNumberOption(command, args, 'iterations', 1000, 1, 1e9),
    warmup: wholeNumberOption(command, args, 'warmup', 100, 0, 1e9),
    inFlight: wholeNumberOption(command, args, 'in-flight', 1, 1, 1024),
    directions: parseDirections(optionText(args, 'directions') ?? 'read,write'),
    timeoutMs: wholeNumberOption(command, args, 'timeout', defaultTimeoutS, 1, maxTimeoutS) * 1000,
    format: documentFormatOf(command, args),
  };
}

/** The side this process is, from `--listen` or `--connect` (exactly one); a `UsageError` for any option that does not fit. */
export function linkPlanOf(args: CommandArgs): ListenPlan | ConnectPlan {
  if (args.positionals.length > 0)
    throw new UsageError(command, `unexpected argument ${JSON.stringify(args.positionals[0])}`);
  const peer = optionText(args, 'connect');
  const listen = args.options.has('listen');
  if (listen === (peer !== undefined))
    throw new UsageError(
      command,
      listen
        ? '--listen and --connect are the two sides; give one'
        : 'give --listen (this side waits) or --connect <host:port>',
    );
  return peer === undefined ? listenPlan(args) : connectPlan(args, peer);
}
