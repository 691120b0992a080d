// The adoption protocol's messages (docs/engines.md): what an engine sends a sidecar over its unix socket
// (`adopt` with a memfd, `blocks` updates) and what the sidecar answers (`adopted`, `refused`), each a JSON
// object of one SOCK_SEQPACKET packet. Parsing never throws: a message is accepted, or refused with a stable
// reason and a sentence naming what was wrong.
import { type Geometry, type Role, roles, safeParseGeometry } from '@kvreuse/descriptors';
import { type BlockHashScheme, hashBlockChain } from '@kvreuse/inventory';

export const adoptionProtocolVersion = 1;

/** Why a sidecar refused a message: stable codes, the `reason` of a `refused` answer. */
export const adoptionRefusals = [
  'malformed-json',
  'unknown-type',
  'unsupported-version',
  'bad-layout',
  'missing-memfd',
  'unexpected-fds',
  'bad-memfd',
  'too-small',
  'vram-not-supported',
  'already-adopted',
  'not-adopted',
  'bad-blocks',
  'adoption-failed',
  // Refused by the socket itself, before any JSON was read (kvreuse_sidecar.h).
  'message-too-large',
  'too-many-fds',
  'empty-message',
  // GPU memory: the CUDA IPC handle is not one (not base64 of 64 bytes, or the driver refuses to open it), or
  // this sidecar's process has no usable CUDA driver or GPU.
  'bad-ipc-handle',
  'vram-unavailable',
] as const;
export type AdoptionRefusal = (typeof adoptionRefusals)[number];

/** A block of the adopted banks and the hash of what it holds (the hash pins and the inventory name). */
export interface StoredBlock {
  readonly block: number;
  readonly hash: bigint;
}

/** The size of a CUDA IPC memory handle, as `ipcHandle` carries it (base64). */
export const cudaIpcHandleBytes = 64;

/**
 * Where an adopted rank's memory is: host memory in the memfd passed with `adopt` (`dram`), or GPU memory
 * on `device` that the sidecar opens through the engine's CUDA IPC handle (`vram`, no descriptor passed).
 */
export type AdoptMemory =
  { readonly kind: 'dram' } | { readonly kind: 'vram'; readonly device: number; readonly ipcHandle: Buffer };

/** The layout of an `adopt`: the engine's worker and rank, its memory, and how its banks lie in it. */
export interface AdoptLayout {
  readonly memory: AdoptMemory;
  readonly workerId: string;
  /** The engine's own incarnation, or undefined for the sidecar to draw one. */
  readonly incarnation: string | undefined;
  readonly role: Role;
  readonly geometry: Geometry;
  readonly tpSize: number;
  readonly ppSize: number;
  readonly dpRank: number;
  readonly tpRank: number;
  readonly ppRank: number;
  /** Blocks per bank. */
  readonly blocks: number;
  readonly blockStride: number | undefined;
  readonly planeStride: number | undefined;
  /** Where the first bank begins, in bytes from the start of the memfd or of the GPU allocation (0). */
  readonly start: number;
}

/**
 * A token sequence from its start and the block holding each of its full blocks, in order: the sidecar
 * hashes the chain itself (kvreuse's chain hash), so the engine need not know it.
 */
export interface StoredSequence {
  readonly blocks: readonly number[];
  readonly tokens: readonly number[];
}

export type EngineMessage =
  | {
      readonly type: 'adopt';
      readonly layout: AdoptLayout;
      readonly stored: readonly StoredBlock[];
      readonly sequences: readonly StoredSequence[];
    }
  | {
      readonly type: 'blocks';
      readonly stored: readonly StoredBlock[];
      readonly sequences: readonly StoredSequence[];
      readonly removed: readonly number[];
    };

export type ParsedEngineMessage =
  | { readonly ok: true; readonly message: EngineMessage }
  | { readonly ok: false; readonly reason: AdoptionRefusal; readonly detail: string };

type Fields = Record<string, unknown>;
const refuse = (reason: AdoptionRefusal, detail: string) => ({ ok: false as const, reason, detail });

function isObject(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function wholeNumber(value: unknown, minimum: number, maximum = Number.MAX_SAFE_INTEGER): value is number {
  return Number.isSafeInteger(value) && (value as number) >= minimum && (value as number) <= maximum;
}

const hashPattern = /^(0x[0-9a-fA-F]{1,16}|[0-9]{1,20})$/;

/** A 64-bit hash as the protocol writes it: a decimal or 0x-hexadecimal string (JSON numbers lose bits above 2^53). */
function parseHash(value: unknown): bigint | undefined {
  if (typeof value !== 'string' || !hashPattern.test(value)) return undefined;
  const hash = BigInt(value);
  return hash < 1n << 64n ? hash : undefined;
}

/** `stored` entries ({ block, hash }), each block below `blocks` (undefined: not checked yet), or the sentence saying which is wrong. */
export function parseStored(value: unknown, blocks?: number): StoredBlock[] | string {
  if (value === undefined) return [];
  if (!Array.isArray(value)) return 'stored must be an array of { block, hash }';
  const stored: StoredBlock[] = [];
  for (const [index, entry] of value.entries()) {
    const hash = isObject(entry) ? parseHash(entry['hash']) : undefined;
    const block = isObject(entry) ? entry['block'] : undefined;
    if (hash === undefined || !wholeNumber(block, 0, blocks === undefined ? 0xffffffff : blocks - 1))
      return `stored[${index}] must be { block: 0..${blocks === undefined ? 'blocks - 1' : blocks - 1}, hash: a decimal or 0x string below 2^64 }`;
    stored.push({ block, hash });
  }
  return stored;
}

const isWholeArray = (value: unknown, maximum: number): value is number[] =>
  Array.isArray(value) && value.every((item) => wholeNumber(item, 0, maximum));

/** `sequences` entries ({ blocks, tokens }), or the sentence saying which is wrong. */
function parseSequences(value: unknown): StoredSequence[] | string {
  if (value === undefined) return [];
  if (!Array.isArray(value)) return 'sequences must be an array of { blocks, tokens }';
  for (const [index, entry] of value.entries()) {
    if (!isObject(entry) || !isWholeArray(entry['blocks'], 0xffffffff) || !isWholeArray(entry['tokens'], 0xffffffff))
      return `sequences[${index}] must be { blocks: block numbers, tokens: token ids from the sequence's start }`;
  }
  return (value as Fields[]).map((entry) => ({
    blocks: entry['blocks'] as number[],
    tokens: entry['tokens'] as number[],
  }));
}

/**
 * The blocks of `sequences` with their kvreuse chain hashes under `scheme`, or the sentence saying which
 * sequence does not name one block per full block of its tokens, or names a block at or past `blocks`.
 */
export function chainStored(
  sequences: readonly StoredSequence[],
  scheme: BlockHashScheme,
  blocks: number,
): StoredBlock[] | string {
  const stored: StoredBlock[] = [];
  for (const [index, { blocks: held, tokens }] of sequences.entries()) {
    const chain = hashBlockChain(tokens, scheme);
    if (held.length !== chain.length)
      return `sequences[${index}] names ${held.length} blocks for ${chain.length} full blocks of ${scheme.blockTokens} tokens`;
    const outside = held.find((block) => block >= blocks);
    if (outside !== undefined)
      return `sequences[${index}] names block ${outside}, outside the ${blocks} blocks of a bank`;
    held.forEach((block, position) => stored.push({ block, hash: chain[position] as bigint }));
  }
  return stored;
}

const optionalStride = (value: unknown): boolean => value === undefined || wholeNumber(value, 1);

const layoutFields = new Set([
  'workerId',
  'incarnation',
  'role',
  'geometry',
  'tpSize',
  'ppSize',
  'dpRank',
  'tpRank',
  'ppRank',
  'blocks',
  'blockStride',
  'planeStride',
  'start',
  'memory',
  'device',
  'ipcHandle',
]);

const base64Pattern = /^[A-Za-z0-9+/]*={0,2}$/;

/** The memory fields of a layout (`memory`, `device`, `ipcHandle`), or the refusal naming what is wrong. */
function parseMemory(layout: Fields): AdoptMemory | ReturnType<typeof refuse> {
  const { memory = 'dram', device, ipcHandle } = layout;
  if (memory === 'dram') {
    if (device !== undefined || ipcHandle !== undefined)
      return refuse('bad-layout', "layout.device and ipcHandle go with memory 'vram' only");
    return { kind: 'dram' };
  }
  if (memory !== 'vram') return refuse('bad-layout', "layout.memory must be 'dram' or 'vram'");
  if (!wholeNumber(device, 0, 0xffffffff))
    return refuse('bad-layout', "layout.device must be the GPU ordinal (0 to 2^32 - 1) with memory 'vram'");
  const handle =
    typeof ipcHandle === 'string' && base64Pattern.test(ipcHandle) ? Buffer.from(ipcHandle, 'base64') : undefined;
  if (handle === undefined || handle.length !== cudaIpcHandleBytes)
    return refuse(
      'bad-ipc-handle',
      `layout.ipcHandle must be the ${cudaIpcHandleBytes} bytes of cuIpcGetMemHandle's handle in base64${
        handle === undefined ? '' : ` (got ${handle.length} bytes)`
      }`,
    );
  return { kind: 'vram', device, ipcHandle: handle };
}

/** The layout fields of an `adopt`, or the refusal naming the first one wrong. */
function parseLayout(layout: unknown): { layout: AdoptLayout } | ReturnType<typeof refuse> {
  if (!isObject(layout)) return refuse('bad-layout', 'layout must be an object');
  const unknown = Object.keys(layout).find((key) => !layoutFields.has(key));
  if (unknown !== undefined)
    return refuse(
      'bad-layout',
      `layout has no field ${JSON.stringify(unknown)} (blocks go in stored or sequences, or a blocks message)`,
    );
  const memory = parseMemory(layout);
  if ('ok' in memory) return memory;
  const { workerId, incarnation, role = 'decode', tpSize = 1, ppSize = 1, dpRank = 0, tpRank = 0, ppRank = 0 } = layout;
  if (typeof workerId !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(workerId))
    return refuse('bad-layout', 'layout.workerId must be 1 to 64 letters, digits, dots, dashes or underscores');
  if (incarnation !== undefined && (typeof incarnation !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(incarnation)))
    return refuse(
      'bad-layout',
      'layout.incarnation, when given, must be 1 to 64 letters, digits, dots, dashes or underscores',
    );
  if (!(roles as readonly unknown[]).includes(role))
    return refuse('bad-layout', `layout.role must be one of ${roles.join(', ')}`);
  const geometry = safeParseGeometry(layout['geometry']);
  if (!geometry.success) return refuse('bad-layout', `layout.geometry: ${geometry.error.message}`);
  if (!wholeNumber(tpSize, 1, 1024) || !wholeNumber(ppSize, 1, 1024) || !wholeNumber(dpRank, 0, 65535))
    return refuse('bad-layout', 'layout.tpSize and ppSize must be 1 to 1024, dpRank 0 to 65535');
  if (!wholeNumber(tpRank, 0, tpSize - 1) || !wholeNumber(ppRank, 0, ppSize - 1))
    return refuse('bad-layout', `layout.tpRank must be below tpSize (${tpSize}) and ppRank below ppSize (${ppSize})`);
  if (!wholeNumber(layout['blocks'], 1, 0xffffffff)) return refuse('bad-layout', 'layout.blocks must be 1 to 2^32 - 1');
  if (!optionalStride(layout['blockStride']) || !optionalStride(layout['planeStride']))
    return refuse('bad-layout', 'layout.blockStride and planeStride, when given, must be whole numbers of bytes ≥ 1');
  const { start = 0 } = layout;
  if (!wholeNumber(start, 0)) return refuse('bad-layout', 'layout.start, when given, must be a whole number of bytes');
  return {
    layout: {
      memory,
      workerId,
      incarnation: incarnation as string | undefined,
      role: role as Role,
      geometry: geometry.data,
      tpSize,
      ppSize,
      dpRank,
      tpRank,
      ppRank,
      blocks: layout['blocks'] as number,
      blockStride: layout['blockStride'] as number | undefined,
      planeStride: layout['planeStride'] as number | undefined,
      start,
    },
  };
}

/** Parses one packet an engine sent, with the number of descriptors passed along; never throws. */
export function parseEngineMessage(data: Uint8Array, fdCount: number): ParsedEngineMessage {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(data).toString('utf8'));
  } catch (error) {
    return refuse('malformed-json', `the message is not JSON: ${(error as Error).message}`);
  }
  if (!isObject(value)) return refuse('malformed-json', 'the message must be a JSON object');
  if (value['version'] !== undefined && value['version'] !== adoptionProtocolVersion)
    return refuse(
      'unsupported-version',
      `this sidecar speaks version ${adoptionProtocolVersion}, not ${String(value['version'])}`,
    );
  if (value['type'] === 'adopt') {
    const parsed = parseLayout(value['layout']);
    if ('ok' in parsed) return parsed;
    const fds = parsed.layout.memory.kind === 'dram' ? 1 : 0;
    if (fdCount !== fds)
      return refuse(
        fdCount === 0 ? 'missing-memfd' : 'unexpected-fds',
        fds === 1
          ? `adopt passes exactly one memfd (got ${fdCount})`
          : `adopt of GPU memory passes no descriptor, its ipcHandle (got ${fdCount})`,
      );
    const stored = parseStored(value['stored'], parsed.layout.blocks);
    if (typeof stored === 'string') return refuse('bad-blocks', stored);
    const sequences = parseSequences(value['sequences']);
    if (typeof sequences === 'string') return refuse('bad-blocks', sequences);
    return { ok: true, message: { type: 'adopt', layout: parsed.layout, stored, sequences } };
  }
  if (value['type'] === 'blocks') {
    if (fdCount !== 0) return refuse('unexpected-fds', `blocks passes no descriptor (got ${fdCount})`);
    const stored = parseStored(value['stored']);
    if (typeof stored === 'string') return refuse('bad-blocks', stored);
    const removed = value['removed'] ?? [];
    if (!Array.isArray(removed) || !removed.every((block) => wholeNumber(block, 0, 0xffffffff)))
      return refuse('bad-blocks', 'removed must be an array of block numbers');
    const sequences = parseSequences(value['sequences']);
    if (typeof sequences === 'string') return refuse('bad-blocks', sequences);
    return { ok: true, message: { type: 'blocks', stored, sequences, removed } };
  }
  return refuse('unknown-type', `type must be 'adopt' or 'blocks' (got ${JSON.stringify(value['type']) ?? 'none'})`);
}

/** The `refused` answer. */
export function refusedAnswer(reason: AdoptionRefusal, detail: string): string {
  return JSON.stringify({ type: 'refused', version: adoptionProtocolVersion, reason, message: detail });
}

/** The `adopted` answer: the worker and incarnation the banks are published under, and where each bank lies in the memfd. */
export function adoptedAnswer(
  workerId: string,
  incarnation: string,
  banks: readonly { readonly offset: number; readonly bytes: number }[],
): string {
  return JSON.stringify({ type: 'adopted', version: adoptionProtocolVersion, workerId, incarnation, banks });
}
