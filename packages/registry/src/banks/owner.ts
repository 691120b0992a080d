import type { Region } from '@kvreuse/native-bindings';

/**
 * Who may free or reuse a bank's memory. kvreuse only ever gives memory back to its owner: it calls
 * the framework's release callback, or frees what the native allocator gave kvreuse itself.
 */
export type BankOwner = FrameworkOwner | KvreuseOwner;

/** Memory the framework (the inference engine) allocated; kvreuse never frees it. */
export interface FrameworkOwner {
  readonly kind: 'framework';
  /** Opaque to kvreuse: whatever lets the framework recognise its allocation. */
  readonly token: unknown;
  /** Called once when kvreuse hands the bank back (after deregistration). */
  readonly release: () => void | Promise<void>;
}

/** Memory kvreuse took from the native allocator; handing it back frees it. */
export interface KvreuseOwner {
  readonly kind: 'kvreuse';
  readonly allocation: OwnedAllocation;
}

/** A native allocation that kvreuse owns: an `Allocation` from `agent.allocate()` of `@kvreuse/native-bindings`. */
export interface OwnedAllocation {
  readonly address: bigint;
  readonly bytes: bigint | number;
  free(): void | Promise<void>;
  /**
   * Whether `free()` runs on the thread of the agent that registered `region`, after a deregistration
   * of it begun earlier: then the free may begin as soon as the deregistration was accepted.
   */
  sharesAgentWith?(region: Region): boolean;
}

export function frameworkOwner(token: unknown, release: () => void | Promise<void>): FrameworkOwner {
  return { kind: 'framework', token, release };
}

export function kvreuseOwner(allocation: OwnedAllocation): KvreuseOwner {
  return { kind: 'kvreuse', allocation };
}

export function describeOwner(owner: BankOwner): string {
  return owner.kind === 'framework'
    ? 'the framework'
    : `kvreuse (allocation at 0x${owner.allocation.address.toString(16)})`;
}
