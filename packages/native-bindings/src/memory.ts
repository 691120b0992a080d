import koffi from 'koffi';
import { InvalidArgumentError } from './errors.js';
import { type AgentContext, HandleState, toUint64 } from './handles.js';
import { check } from './library.js';

/** KVT_MEM_*, in the library's order: a kind's index is its native id. */
export const memoryKinds = ['dram', 'vram'] as const;
export type MemoryKind = (typeof memoryKinds)[number];

/** The size of a CUDA IPC memory handle (cuIpcGetMemHandle's CUipcMemHandle). */
export const VRAM_IPC_HANDLE_BYTES = 64;

/**
 * Memory of an agent: page-aligned DRAM kvreuse owns, in the form its backend moves fastest
 * (`agent.allocate`), device memory on a GPU it owns (`agent.allocateVram`), or another process's GPU
 * memory opened through its CUDA IPC handle (`agent.openVramIpc`, `imported`). It is not registered: pass
 * it to `agent.register`, which registers it as its kind and device. Free it with `free()` after
 * deregistering (an imported one is closed; its owner keeps its memory).
 */
export class Allocation {
  readonly address: bigint;
  readonly bytes: number;
  readonly kind: MemoryKind;
  /** The GPU ordinal of vram; 0 for dram. */
  readonly device: number;
  /** Another process's vram opened through its CUDA IPC handle (`agent.openVramIpc`), not kvreuse's. */
  readonly imported: boolean;
  readonly #agent: AgentContext;
  readonly #state: HandleState;
  #view: Buffer | undefined;

  /** @internal Use agent.allocate, agent.allocateVram or agent.openVramIpc. */
  constructor(
    agent: AgentContext,
    address: bigint,
    bytes: number,
    kind: MemoryKind = 'dram',
    device = 0,
    imported = false,
  ) {
    this.#agent = agent;
    this.address = address;
    this.bytes = bytes;
    this.kind = kind;
    this.device = device;
    this.imported = imported;
    const where = kind === 'vram' ? ` of GPU ${device}${imported ? ', imported' : ''}` : '';
    this.#state = new HandleState(
      this,
      'Allocation',
      `0x${address.toString(16)} (${bytes} bytes${where}) of agent ${agent.name}`,
    );
  }

  get isOpen(): boolean {
    return this.#state.isOpen;
  }

  /**
   * The memory itself, without a copy, for filling and verifying. The Buffer points at native memory:
   * do not use it after `free()` (JavaScript cannot revoke it; that is the caller's contract).
   */
  view(): Buffer {
    this.#state.assertOpen('view an allocation');
    if (this.kind === 'vram')
      throw new InvalidArgumentError('allocation', this.address, 'is vram, which the host cannot view');
    this.#view ??= Buffer.from(koffi.view(this.address, this.bytes));
    return this.#view;
  }

  /**
   * Copies `bytes` into the allocation at `offset` (default 0) and returns once they are there: for vram
   * the library copies them up to the GPU (no CUDA toolkit needed), for dram they go through `view()`.
   * Not ordered with transfers: do not write where an operation is reading or writing.
   */
  write(bytes: Uint8Array, offset = 0): void {
    this.#state.assertOpen('write an allocation');
    if (!(bytes instanceof Uint8Array)) throw new InvalidArgumentError('bytes', bytes, 'must be a Uint8Array');
    if (!Number.isSafeInteger(offset) || offset < 0 || offset + bytes.length > this.bytes)
      throw new InvalidArgumentError('offset', offset, `must leave room for ${bytes.length} bytes in ${this.bytes}`);
    if (bytes.length === 0) return;
    if (this.kind === 'dram') {
      this.view().set(bytes, offset);
      return;
    }
    this.#agent.assertOpen('write an allocation');
    const library = this.#agent.library;
    const address = this.address + BigInt(offset);
    check(
      library,
      'kvt_mem_write_vram',
      library.api.kvt_mem_write_vram(this.#agent.id, address, bytes, BigInt(bytes.length)),
    );
  }

  /**
   * The CUDA IPC handle of this vram (`VRAM_IPC_HANDLE_BYTES` bytes; the owner's for an imported one): what
   * another process's `agent.openVramIpc` opens. Throws BACKEND when the driver refuses to export it.
   */
  ipcHandle(): Buffer {
    this.#state.assertOpen('export an allocation');
    if (this.kind !== 'vram')
      throw new InvalidArgumentError('allocation', this.address, 'is dram, which has no CUDA IPC handle');
    this.#agent.assertOpen('export an allocation');
    const library = this.#agent.library;
    const handle = Buffer.alloc(VRAM_IPC_HANDLE_BYTES);
    check(
      library,
      'kvt_mem_vram_ipc_handle',
      library.api.kvt_mem_vram_ipc_handle(this.#agent.id, this.address, handle),
    );
    return handle;
  }

  /**
   * Whether this allocation's `free()` is done by the agent that registered `region`: that agent's
   * thread runs its memory jobs in the order begun, so a free begun once the region's deregistration
   * was begun runs after that deregistration ended (the memory is never unmapped under it).
   */
  sharesAgentWith(region: Region): boolean {
    return region.belongsTo(this.#agent);
  }

  /**
   * Frees the memory (closes the mapping of an imported one). Rejects with BUSY while a registration lies
   * inside it (nothing changes). Else the allocation is closed at once and the agent's thread unmaps it
   * (tens of milliseconds for hundreds of megabytes, not on the JavaScript thread); the promise resolves
   * once it is gone.
   */
  async free(): Promise<void> {
    this.#state.assertOpen('free an allocation');
    this.#agent.assertOpen('free an allocation');
    const library = this.#agent.library;
    const freed = this.#agent.beginMemoryJob('kvt_mem_free', (job) =>
      library.api.kvt_mem_free_begin(this.#agent.id, this.address, job),
    );
    this.#view = undefined;
    this.#state.markClosed();
    await freed;
  }
}

/** Memory to register: an Allocation, or any range the caller keeps valid until it is deregistered. */
export interface MemoryRange {
  readonly address: bigint | number;
  readonly bytes: bigint | number;
  /** Default `dram`. */
  readonly kind?: MemoryKind;
  /** GPU ordinal for vram; must be 0 for dram (the default). */
  readonly device?: number;
  /**
   * The file this dram range is a shared mapping of (a memfd sealed against shrinking, e.g. `FileMemory`):
   * its descriptor and the file offset of `address`. Readers on the same host then map the file and copy
   * READs themselves, at memory speed, instead of asking this agent's thread for 8 KiB fragments (WRITEs
   * and readers elsewhere still go through UCX). The agent keeps its own duplicate of the descriptor.
   */
  readonly file?: { readonly fd: number; readonly offset?: bigint | number };
}

/** Registered memory: what peers may read or write once they load this agent's metadata. */
export class Region {
  /** The region id, unique in its agent; peers name it in descriptors' remote region tables. */
  readonly id: number;
  readonly address: bigint;
  readonly bytes: number;
  readonly kind: MemoryKind;
  readonly device: number;
  readonly #agent: AgentContext;
  readonly #state: HandleState;

  /** @internal Use agent.register. */
  constructor(
    agent: AgentContext,
    id: number,
    range: { address: bigint; bytes: number; kind: MemoryKind; device: number },
  ) {
    this.#agent = agent;
    this.id = id;
    this.address = range.address;
    this.bytes = range.bytes;
    this.kind = range.kind;
    this.device = range.device;
    this.#state = new HandleState(this, 'Region', `${id} of agent ${agent.name}`);
  }

  get isOpen(): boolean {
    return this.#state.isOpen;
  }

  /** @internal The owning agent, to check that a region is used with its own agent. */
  belongsTo(agent: AgentContext): boolean {
    return this.#agent === agent;
  }

  /** @internal */
  assertOpen(action: string): void {
    this.#state.assertOpen(action);
  }

  /**
   * Deregisters the region. Rejects with BUSY while an operation that references it is not terminal
   * (nothing changes). Else the region is closed and gone from the agent's metadata at once (its
   * allocation may be freed); the agent's thread then stops readers that loaded metadata naming it
   * and unmaps it (tens of milliseconds, not on the JavaScript thread): the promise resolves once done.
   */
  async deregister(): Promise<void> {
    this.#state.assertOpen('deregister a region');
    this.#agent.assertOpen('deregister a region');
    const library = this.#agent.library;
    const deregistered = this.#agent.beginMemoryJob('kvt_mem_deregister', (job) =>
      library.api.kvt_mem_deregister_begin(this.#agent.id, this.id, job),
    );
    this.#state.markClosed();
    await deregistered;
  }
}

/** Validates a MemoryRange and registers it with the agent. */
export function registerMemory(agent: AgentContext, range: MemoryRange): Region {
  const address = toUint64(range.address);
  if (address === undefined)
    throw new InvalidArgumentError('address', range.address, 'must be a non-negative integer below 2^64');
  const bytes = toUint64(range.bytes);
  if (bytes === undefined || bytes === 0n || bytes > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new InvalidArgumentError('bytes', range.bytes, 'must be a positive safe integer');
  }
  const kind = range.kind ?? 'dram';
  const kindId = memoryKinds.indexOf(kind);
  if (kindId === -1) throw new InvalidArgumentError('kind', kind, "must be 'dram' or 'vram'");
  const device = range.device ?? 0;
  if (!Number.isInteger(device) || device < 0 || device > 0xffff_ffff) {
    throw new InvalidArgumentError('device', device, 'must be a uint32');
  }
  const out = new Uint32Array(1);
  if (range.file === undefined) {
    check(
      agent.library,
      'kvt_mem_register',
      agent.library.api.kvt_mem_register(agent.id, address, bytes, kindId, device, out),
    );
  } else {
    const { fd, offset } = checkFileBacking(range.file, kind, device);
    check(
      agent.library,
      'kvt_mem_register_fd',
      agent.library.api.kvt_mem_register_fd(agent.id, address, bytes, fd, offset, out),
    );
  }
  return new Region(agent, out[0] ?? 0, { address, bytes: Number(bytes), kind, device });
}

function checkFileBacking(file: unknown, kind: MemoryKind, device: number): { fd: number; offset: bigint } {
  if (typeof file !== 'object' || file === null)
    throw new InvalidArgumentError('file', file, 'must be { fd, offset? }');
  if (kind !== 'dram' || device !== 0) throw new InvalidArgumentError('file', file, 'is only for dram on device 0');
  const { fd, offset = 0 } = file as { fd?: unknown; offset?: unknown };
  if (typeof fd !== 'number' || !Number.isInteger(fd) || fd < 0 || fd > 0x7fff_ffff) {
    throw new InvalidArgumentError('file.fd', fd, 'must be an open file descriptor (a non-negative int32)');
  }
  const fileOffset = typeof offset === 'number' || typeof offset === 'bigint' ? toUint64(offset) : undefined;
  if (fileOffset === undefined)
    throw new InvalidArgumentError('file.offset', offset, 'must be a non-negative integer below 2^64');
  return { fd, offset: fileOffset };
}
