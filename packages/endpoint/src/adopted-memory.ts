// The memory of an engine rank an EngineSidecar serves, as the sidecar holds it: the engine's memfd mapped
// here (host memory), or the engine's GPU allocation opened here through its CUDA IPC handle (an imported
// vram allocation of the rank's agent). Either way the engine owns the memory; closing it drops only the
// sidecar's own mapping.
import type { MemKind } from '@kvreuse/descriptors';
import type { Allocation, FileMemory } from '@kvreuse/native-bindings';

export interface AdoptedMemory {
  readonly kind: MemKind;
  /** The GPU ordinal of vram; 0 for host memory. */
  readonly device: number;
  /** Where the engine's memory starts in this process. */
  readonly address: bigint;
  readonly bytes: number;
  /** The memfd host memory is a mapping of (its banks are registered with it); undefined for vram. */
  readonly fd: number | undefined;
  /** Whether the sidecar's mapping is still there. */
  readonly isOpen: boolean;
  /** The bytes of [offset, +bytes) for the rank's host-side checksums; undefined for vram (summed on the GPU). */
  bytesAt(offset: number, bytes: number): Uint8Array | undefined;
  /** Drops the sidecar's mapping (unmaps the memfd, or closes the IPC mapping); never frees the engine's memory. */
  close(): Promise<void>;
}

/** The engine's memfd, mapped by the sidecar. */
export function mappedMemfd(memory: FileMemory): AdoptedMemory {
  return {
    kind: 'dram',
    device: 0,
    address: memory.address,
    bytes: memory.bytes,
    fd: memory.fd,
    get isOpen() {
      return memory.isOpen;
    },
    bytesAt: (offset, bytes) => memory.view().subarray(offset, offset + bytes),
    close: async () => memory.close(),
  };
}

/** The engine's GPU allocation, opened by the rank's agent (`agent.openVramIpc`). */
export function importedVram(allocation: Allocation): AdoptedMemory {
  return {
    kind: 'vram',
    device: allocation.device,
    address: allocation.address,
    bytes: allocation.bytes,
    fd: undefined,
    get isOpen() {
      return allocation.isOpen;
    },
    bytesAt: () => undefined,
    close: () => allocation.free(),
  };
}
