/**
 * Typed koffi facade over libkvreuse_transport, the native transport (UCX and loopback) every kvreuse byte moves through.
 *
 * @packageDocumentation
 * @module \@kvreuse/native-bindings
 */
export { Agent, type AgentOptions, type AllocateOptions, type CloseOptions, type CloseOutcome } from './agent.js';
export {
  type BlockingCall,
  BlockingCallMonitor,
  type BlockingCallMonitorOptions,
  describeBlockingCall,
  monitorBlockingCalls,
} from './blocking-calls.js';
export type { Backend } from './backend.js';
export type { Counters } from './counters.js';
export {
  type FacadeErrorCode,
  ForeignHandleError,
  HandleClosedError,
  type HandleKind,
  InvalidArgumentError,
  LibraryLoadError,
  LibraryMismatchError,
  LibraryNotFoundError,
  NativeTransportError,
  TransportUsageError,
} from './errors.js';
export { type BlockChecksumsRequest, type ChecksumSide } from './checksums.js';
export { type FaultPoint, Faults } from './faults.js';
export { type HeartbeatOptions, heartbeatLimits, type PeerEvent, type PeerEventCause } from './heartbeat.js';
export type { UcxConfinement } from './ucx-confinement.js';
export { defaultLibraryPaths, LIBRARY_FILE } from './library.js';
export { FileMemory } from './file-memory.js';
export { SidecarClient } from './sidecar-client.js';
export { closeReceivedFds, type SidecarEvent, SidecarListener } from './sidecar-listener.js';
export { Allocation, type MemoryKind, type MemoryRange, memoryKinds, Region, VRAM_IPC_HANDLE_BYTES } from './memory.js';
export type { Notification } from './notifications.js';
export { type CancelOutcome, Operation, type OperationResult, type OperationStatus } from './operation.js';
export { Peer, type PeerInfo, type PeerRegion, type PeerState } from './peer.js';
export { type StatusCodeName, statusCodeNames } from './status.js';
export { type PostBlocksRequest, RegisteredTemplate, type RegisterTemplateRequest } from './template.js';
export type { PostRequest, TransferDescriptors, TransferDirection } from './transfer.js';
export { type Capabilities, type LoadTransportOptions, loadTransport, Transport } from './transport.js';
export { transportGroup } from './settings.js';
