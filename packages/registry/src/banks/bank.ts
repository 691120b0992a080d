import type { MemKind } from '@kvreuse/descriptors';
import type { Region } from '@kvreuse/native-bindings';
import {
  BankAlreadyRegisteredError,
  BankAlreadyReleasedError,
  BankInUseError,
  BankOwnerReleaseError,
  BankReferenceReleasedError,
  BankReinstateError,
  BankStateError,
  InvalidBankError,
} from '../errors.js';
import type { BankLabel, BankRetainedBy, BankState } from './label.js';
import type { BankOwner } from './owner.js';

/** One contiguous allocation holding KV blocks of one rank. */
export interface BankSpec {
  readonly tpRank: number;
  readonly ppRank: number;
  /** Position of the bank in its rank's bank list. */
  readonly index: number;
  readonly memKind: MemKind;
  /** The GPU ordinal for vram; the NUMA node for dram. */
  readonly deviceId: number;
  readonly address: bigint;
  readonly bytes: bigint;
  readonly blocks: number;
  readonly blockStride: bigint;
  /**
   * Layer-separate banks that hold every plane of their layer (K and V interleaved per block, as vLLM
   * lays them out): plane p of block b is at `b × blockStride + p × planeStride`. Published in rank
   * part version 2. Absent (or undefined) for one bank per (layer, plane).
   */
  readonly planeStride?: bigint | undefined;
  /**
   * Dram that is a shared mapping of a file sealed against shrinking (a memfd): its descriptor and the
   * file offset of the bank's first byte. The bank is registered with it, so readers on the same host
   * copy out of the file at memory speed (`kvt_mem_register_fd`). Absent for any other memory.
   */
  readonly file?: { readonly fd: number; readonly offset: number } | undefined;
}

/** A hold on a registered bank (an operation that may touch it); the bank cannot be released while any is held. */
export interface BankReference {
  readonly bank: Bank;
  /** Drops the hold; a second call throws `BankReferenceReleasedError`. */
  release(): void;
}

const ADDRESS_LIMIT = 1n << 64n;

// The class carries every field of its spec (declared once, in BankSpec).
export interface Bank extends BankSpec {
  readonly owner: BankOwner;
}

/**
 * A bank and its ownership state machine:
 *
 *     owned → registering → registered → releasing → returned
 *                 ↓ (failed)     ↓ ↑ (rolled back / re-)   ↑
 *               owned          retained ──────────────────┘ (once proven quiescent)
 *
 * A bank is retained by a `quarantine` (an operation on it is not terminal: only from `registered`)
 * or by a `native-refusal` (a deregistration or rollback the native layer refused: from `registering`,
 * `registered` or `releasing`). Only a quarantined bank may go back to `registered` (`reinstate()`),
 * once nothing references it; a bank retained by a native refusal may only be released.
 *
 * Every transition is checked. Native registration itself is done by `registerRank`; the bank only
 * records what happened, so that a failure at any step leaves a state that says the truth.
 */
export class Bank implements BankLabel {
  #state: BankState = 'owned';
  #region: Region | undefined;
  #agentName: string | undefined;
  #references = 0;
  #retainedReason: string | undefined;
  #retainedBy: BankRetainedBy | undefined;
  #handingBack = false;

  private constructor(spec: BankSpec, owner: BankOwner) {
    const { tpRank, ppRank, index, memKind, deviceId, address, bytes, blocks, blockStride, planeStride } = spec;
    Object.assign(this, { tpRank, ppRank, index, memKind, deviceId, address, bytes, blocks, blockStride, owner });
    if (planeStride !== undefined) Object.assign(this, { planeStride });
    if (spec.file !== undefined) Object.assign(this, { file: { fd: spec.file.fd, offset: spec.file.offset } });
  }

  /** Takes a bank into kvreuse's care, in state `owned`. Registers nothing. */
  static adopt(spec: BankSpec, owner: BankOwner): Bank {
    if (typeof spec !== 'object' || spec === null)
      throw new InvalidBankError('spec', spec, 'must be an object describing the bank');
    validateSpec(spec);
    validateOwner(spec, owner);
    return new Bank(spec, owner);
  }

  get state(): BankState {
    return this.#state;
  }

  /** The native registration while the bank is registered (or retained, or releasing before deregistration). */
  get region(): Region | undefined {
    return this.#region;
  }

  /** The name of the agent that holds `region`, while the bank has one: with it, the region names exactly one registration. */
  get agentName(): string | undefined {
    return this.#agentName;
  }

  get references(): number {
    return this.#references;
  }

  /** Why the bank was retained, while it is. */
  get retainedReason(): string | undefined {
    return this.#retainedReason;
  }

  /** What retained the bank, while it is: only a `quarantine` may be reinstated. */
  get retainedBy(): BankRetainedBy | undefined {
    return this.#retainedBy;
  }

  /** A plain snapshot naming the bank (rank, index, address, bytes), for reports and errors. */
  label(): BankLabel {
    return { tpRank: this.tpRank, ppRank: this.ppRank, index: this.index, address: this.address, bytes: this.bytes };
  }

  /** Throws the error `beginRegistration` would, without changing anything. */
  assertRegistrable(): void {
    if (this.#state === 'registering' || this.#state === 'registered' || this.#state === 'retained') {
      throw new BankAlreadyRegisteredError(this, this.#state, 'register');
    }
    this.#expect(['owned'], 'register');
  }

  beginRegistration(): void {
    this.assertRegistrable();
    this.#state = 'registering';
  }

  /** The native registration succeeded: `region` of the agent named `agentName` holds the bank's memory. */
  completeRegistration(region: Region, agentName: string): void {
    this.#expect(['registering'], 'complete registration');
    if (typeof region !== 'object' || region === null || typeof region.deregister !== 'function') {
      throw new InvalidBankError('region', region, 'must be the Region the native agent returned from register()');
    }
    if (typeof agentName !== 'string' || agentName === '')
      throw new InvalidBankError('agentName', agentName, 'must name the agent that registered it');
    this.#region = region;
    this.#agentName = agentName;
    this.#state = 'registered';
  }

  /** The native registration failed: the bank is owned again, as before. */
  abortRegistration(): void {
    this.#expect(['registering'], 'abort registration');
    this.#state = 'owned';
  }

  /** A transaction deregistered the bank again (rollback): owned again, as before the transaction. */
  undoRegistration(): void {
    this.#expect(['registered'], 'undo registration');
    this.#refuseIfReferenced('undo registration');
    this.#region = undefined;
    this.#agentName = undefined;
    this.#state = 'owned';
  }

  acquire(): BankReference {
    this.#expect(['registered'], 'acquire a reference');
    this.#references += 1;
    let released = false;
    return {
      bank: this,
      release: () => {
        if (released) throw new BankReferenceReleasedError(this);
        released = true;
        this.#references -= 1;
      },
    };
  }

  /** Starts handing the bank back: allowed once nothing references it. Deregistration happens in `releasing`. */
  beginRelease(): void {
    if (this.#state === 'releasing' || this.#state === 'returned') {
      throw new BankAlreadyReleasedError(this, this.#state, 'release');
    }
    this.#expect(['owned', 'registered', 'retained'], 'release');
    this.#refuseIfReferenced('release');
    this.#state = 'releasing';
  }

  /**
   * The native registration is gone: deregistered, its agent destroyed, or its deregistration accepted
   * by an agent that frees the bank's allocation only after that deregistration ended.
   */
  markDeregistered(): void {
    this.#expect(['releasing'], 'mark deregistered');
    this.#region = undefined;
    this.#agentName = undefined;
  }

  /**
   * Gives the memory back to its owner: the framework's release callback, or the native free of
   * kvreuse's own allocation. On failure the bank stays `releasing` and the call may be retried.
   */
  async completeRelease(): Promise<void> {
    this.#expect(['releasing'], 'complete release');
    if (this.#handingBack) throw new BankAlreadyReleasedError(this, this.#state, 'hand back (already in progress)');
    if (this.#region !== undefined) {
      throw new BankStateError(
        this,
        this.#state,
        `hand back while native region ${this.#region.id} is still registered`,
      );
    }
    this.#handingBack = true;
    try {
      if (this.owner.kind === 'framework') await this.owner.release();
      else await this.owner.allocation.free();
    } catch (cause) {
      throw new BankOwnerReleaseError(this, this.owner.kind, { cause });
    } finally {
      this.#handingBack = false;
    }
    this.#state = 'returned';
  }

  /**
   * Takes the bank out of service without handing it back: it is never deregistered nor handed back
   * until released explicitly once proven unused. `by` says what retained it; it defaults to
   * `native-refusal`, the kind that can never be reinstated. Retaining a retained bank again changes
   * nothing — the first reason and kind stay — except that a native refusal supersedes a quarantine:
   * once the native layer refused the bank, its registration state is unknown.
   */
  retain(reason: string, by: BankRetainedBy = 'native-refusal'): void {
    if (by !== 'quarantine' && by !== 'native-refusal') {
      throw new InvalidBankError('retainedBy', by, "must be 'quarantine' or 'native-refusal'");
    }
    if (typeof reason !== 'string' || reason === '')
      throw new InvalidBankError('reason', reason, 'must say in words why the bank is retained');
    if (this.#state === 'retained' && (by === this.#retainedBy || by === 'quarantine')) return;
    if (this.#state !== 'retained') {
      this.#expect(by === 'quarantine' ? ['registered'] : ['registering', 'registered', 'releasing'], `retain (${by})`);
    }
    this.#retainedReason = reason;
    this.#retainedBy = by;
    this.#state = 'retained';
  }

  /**
   * Puts a bank retained by a quarantine back in service (`registered`, same registration, same
   * owner) once nothing references it. Refused, with `BankReinstateError`, for a bank that is not
   * retained, was retained by a native refusal, or is still referenced.
   */
  reinstate(): void {
    if (this.#state !== 'retained')
      throw new BankReinstateError(this, this.#state, 'not-retained', undefined, undefined, this.#references);
    const refusal =
      this.#retainedBy !== 'quarantine' ? 'native-refusal' : this.#references > 0 ? 'referenced' : undefined;
    if (refusal !== undefined) {
      throw new BankReinstateError(
        this,
        this.#state,
        refusal,
        this.#retainedBy,
        this.#retainedReason,
        this.#references,
      );
    }
    this.#retainedReason = undefined;
    this.#retainedBy = undefined;
    this.#state = 'registered';
  }

  #expect(states: readonly BankState[], transition: string): void {
    if (!states.includes(this.#state)) throw new BankStateError(this, this.#state, transition);
  }

  #refuseIfReferenced(transition: string): void {
    if (this.#references > 0) throw new BankInUseError(this, this.#references, transition);
  }
}

function validateSpec(spec: BankSpec): void {
  for (const field of ['tpRank', 'ppRank', 'index', 'deviceId'] as const) {
    const value: unknown = spec[field];
    if (!Number.isSafeInteger(value) || (value as number) < 0) {
      throw new InvalidBankError(field, value, 'must be a non-negative integer');
    }
  }
  if (spec.memKind !== 'dram' && spec.memKind !== 'vram') {
    throw new InvalidBankError('memKind', spec.memKind, "must be 'dram' or 'vram'");
  }
  for (const field of ['address', 'bytes', 'blockStride'] as const) {
    const value: unknown = spec[field];
    if (typeof value !== 'bigint' || value <= 0n) throw new InvalidBankError(field, value, 'must be a positive bigint');
  }
  const planeStride: unknown = spec.planeStride;
  if (planeStride !== undefined && (typeof planeStride !== 'bigint' || planeStride <= 0n)) {
    throw new InvalidBankError('planeStride', planeStride, 'must be a positive bigint when given');
  }
  const file: unknown = spec.file;
  if (
    file !== undefined &&
    (spec.memKind !== 'dram' ||
      typeof file !== 'object' ||
      file === null ||
      !Number.isSafeInteger((file as { fd?: unknown }).fd) ||
      (file as { fd: number }).fd < 0 ||
      !Number.isSafeInteger((file as { offset?: unknown }).offset) ||
      (file as { offset: number }).offset < 0)
  ) {
    throw new InvalidBankError(
      'file',
      file,
      "a dram bank's { fd, offset }: a descriptor and a file offset, whole numbers ≥ 0",
    );
  }
  if (spec.address + spec.bytes > ADDRESS_LIMIT) {
    throw new InvalidBankError(
      'bytes',
      spec.bytes,
      `address 0x${spec.address.toString(16)} + bytes passes the end of the 64-bit address space`,
    );
  }
  if (!Number.isSafeInteger(spec.blocks) || spec.blocks < 1) {
    throw new InvalidBankError('blocks', spec.blocks, 'must be a positive integer');
  }
  if (BigInt(spec.blocks) * spec.blockStride > spec.bytes) {
    throw new InvalidBankError(
      'blocks',
      spec.blocks,
      `blocks × blockStride ${spec.blockStride} exceeds the bank's ${spec.bytes} bytes`,
    );
  }
}

function validateOwner(spec: BankSpec, owner: BankOwner): void {
  const kind: unknown = (owner as { kind?: unknown } | undefined)?.kind;
  if (kind === 'framework') {
    if (typeof (owner as { release?: unknown }).release !== 'function') {
      throw new InvalidBankError(
        'owner.release',
        (owner as { release?: unknown }).release,
        'a framework owner needs a release callback',
      );
    }
    return;
  }
  if (kind !== 'kvreuse') throw new InvalidBankError('owner.kind', kind, "must be 'framework' or 'kvreuse'");
  const { allocation } = owner as { allocation?: { address?: unknown; bytes?: unknown; free?: unknown } };
  const bytes = allocation?.bytes;
  if (
    typeof allocation?.address !== 'bigint' ||
    (typeof bytes !== 'bigint' && !(Number.isSafeInteger(bytes) && (bytes as number) >= 0)) ||
    typeof allocation.free !== 'function'
  ) {
    throw new InvalidBankError(
      'owner.allocation',
      allocation,
      'a kvreuse owner needs a native allocation (address, bytes, free), its bytes a whole number',
    );
  }
  // A bank is one allocation: handing the bank back frees exactly it.
  if (spec.address !== allocation.address || spec.bytes !== BigInt(allocation.bytes as bigint | number)) {
    throw new InvalidBankError(
      'address',
      spec.address,
      `a kvreuse-owned bank must be exactly its allocation [0x${allocation.address.toString(16)}, +${allocation.bytes}), not [0x${spec.address.toString(16)}, +${spec.bytes})`,
    );
  }
}
