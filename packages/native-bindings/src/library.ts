import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi, { type LibraryHandle } from 'koffi';
import { registerApi } from './blocking-calls.js';
import { LibraryLoadError, LibraryMismatchError, LibraryNotFoundError, NativeTransportError } from './errors.js';
import { pointerParameters, withOffHeapArguments } from './off-heap-arguments.js';
import { statusCodeName } from './status.js';
import { applyUcxDefaults } from './ucx-defaults.js';

/** The library file name; the one place that knows it. */
export const LIBRARY_FILE = 'libkvreuse_transport.so';
const API_MAJOR = 0;
/** The API's minor version that added the last calls this facade makes (block checksums by routes). */
const API_MINOR = 5;

/**
 * The prebuilt package for this machine (an optional dependency npm installs only where its `os`, `cpu`
 * and `libc` fit), or undefined where none is published: anything but Linux with glibc on x64 or arm64.
 */
export function platformPackageName(): string | undefined {
  if (process.platform !== 'linux' || (process.arch !== 'x64' && process.arch !== 'arm64')) return undefined;
  const { header } = process.report.getReport() as { header?: { glibcVersionRuntime?: string } };
  return header?.glibcVersionRuntime === undefined ? undefined : `@kvreuse/native-linux-${process.arch}-gnu`;
}

/** The library inside the platform package, if that package is installed. */
function platformPackageLibrary(): string | undefined {
  const name = platformPackageName();
  if (name === undefined) return undefined;
  try {
    return join(dirname(createRequire(import.meta.url).resolve(`${name}/package.json`)), LIBRARY_FILE);
  } catch {
    return undefined; // not installed: npm skipped it (--omit=optional) or this is not a platform it fits
  }
}

/**
 * Where the library is looked for when no path is given, in order: the repository's `native/build`
 * (two levels above the package: in a kvreuse checkout, what `make -C native` rebuilds, so that tests
 * never run a stale copy), the prebuilt platform package, then a copy built inside the installed package
 * by `kvreuse-build-native` (`native/build`, see README).
 */
export function defaultLibraryPaths(): string[] {
  const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const prebuilt = platformPackageLibrary();
  return [
    resolve(packageDir, '..', '..', 'native', 'build', LIBRARY_FILE),
    ...(prebuilt === undefined ? [] : [prebuilt]),
    join(packageDir, 'native', 'build', LIBRARY_FILE),
  ];
}

/** kvt_template_routes: a template's routes as parallel arrays (entry r of each describes route r). */
export interface TemplateRoutes {
  route_count: number;
  local_index: Uint32Array;
  remote_index: Uint32Array;
  local_base: BigUint64Array;
  remote_base: BigUint64Array;
  local_block_stride: BigUint64Array;
  remote_block_stride: BigUint64Array;
  rows: Uint32Array;
  row_bytes: BigUint64Array;
  local_row_stride: BigUint64Array;
  remote_row_stride: BigUint64Array;
  local_region_count: number;
  local_regions: Uint32Array;
  remote_region_count: number;
  remote_regions: Uint32Array;
  local_block_limit: number;
  remote_block_limit: number;
}

/** kvt_block_routes: where a block's rows are on one side, route by route, as parallel arrays. */
export interface BlockRoutes {
  route_count: number;
  region_index: Uint32Array;
  base: BigUint64Array;
  block_stride: BigUint64Array;
  rows: Uint32Array;
  row_bytes: BigUint64Array;
  row_stride: BigUint64Array;
  region_count: number;
  regions: Uint32Array;
}

/* The structs the prototypes below name, declared to koffi before any function is bound. */
const structs: { readonly [name: string]: Readonly<Record<string, string>> } = {
  kvt_template_routes: {
    route_count: 'uint32_t',
    local_index: 'const uint32_t *',
    remote_index: 'const uint32_t *',
    local_base: 'const uint64_t *',
    remote_base: 'const uint64_t *',
    local_block_stride: 'const uint64_t *',
    remote_block_stride: 'const uint64_t *',
    rows: 'const uint32_t *',
    row_bytes: 'const uint64_t *',
    local_row_stride: 'const uint64_t *',
    remote_row_stride: 'const uint64_t *',
    local_region_count: 'uint32_t',
    local_regions: 'const uint32_t *',
    remote_region_count: 'uint32_t',
    remote_regions: 'const uint32_t *',
    local_block_limit: 'uint32_t',
    remote_block_limit: 'uint32_t',
  } satisfies Record<keyof TemplateRoutes, string>,
  kvt_block_routes: {
    route_count: 'uint32_t',
    region_index: 'const uint32_t *',
    base: 'const uint64_t *',
    block_stride: 'const uint64_t *',
    rows: 'const uint32_t *',
    row_bytes: 'const uint64_t *',
    row_stride: 'const uint64_t *',
    region_count: 'uint32_t',
    regions: 'const uint32_t *',
  } satisfies Record<keyof BlockRoutes, string>,
};
for (const [name, members] of Object.entries(structs)) declareStruct(name, members);

/** Declares a struct to koffi unless another copy of this module (a second install) already did: koffi's type names are process-wide. */
function declareStruct(name: string, members: Readonly<Record<string, string>>): void {
  try {
    koffi.type(name);
  } catch {
    koffi.struct(name, members);
  }
}

/* Every out-parameter is a typed array: koffi hands its memory to C as is, with no conversion. */
export interface NativeApi {
  kvt_version(major: Uint32Array, minor: Uint32Array, patch: Uint32Array): number;
  kvt_version_string(): string;
  kvt_last_error_detail(): string;
  kvt_thread_cpu_ns(): number | bigint;
  kvt_thread_usage(values: BigUint64Array, capacity: number): number;
  kvt_strerror(status: number): string;
  kvt_capabilities(values: BigUint64Array, capacity: number, outCount: Uint32Array): number;
  kvt_capability_detail(capability: number): string | null;
  kvt_agent_create(name: string, backend: number, flags: number, outAgent: Uint32Array): number;
  kvt_agent_create_begin(name: string, backend: number, flags: number, outAgent: Uint32Array): number;
  kvt_agent_create_ucx_begin(
    name: string,
    netDevices: string | null,
    transports: string | null,
    outAgent: Uint32Array,
  ): number;
  kvt_agent_start_status(agent: number): number;
  kvt_agent_destroy(agent: number): number;
  kvt_agent_shutdown(agent: number, deadlineMs: number): number;
  kvt_agent_shutdown_status(agent: number): number;
  kvt_agent_wake_fd(agent: number, outFd: Int32Array): number;
  kvt_agent_set_heartbeat(agent: number, intervalMs: number, misses: number): number;
  kvt_agent_poll(
    agent: number,
    capacity: number,
    opIds: BigUint64Array,
    statuses: Int32Array,
    bytesDone: BigUint64Array,
    outCount: Uint32Array,
    outPending: Uint32Array,
  ): number;
  kvt_mem_job_status(agent: number, job: bigint): number;
  kvt_mem_alloc_begin(
    agent: number,
    length: bigint,
    flags: number,
    outAddress: BigUint64Array,
    outJob: BigUint64Array,
  ): number;
  kvt_mem_free_begin(agent: number, address: bigint, outJob: BigUint64Array): number;
  kvt_mem_alloc_vram(agent: number, device: number, length: bigint, outAddress: BigUint64Array): number;
  kvt_mem_write_vram(agent: number, address: bigint, source: Uint8Array, length: bigint): number;
  kvt_mem_open_vram_ipc(
    agent: number,
    device: number,
    handle: Uint8Array,
    outAddress: BigUint64Array,
    outLength: BigUint64Array,
  ): number;
  kvt_mem_vram_ipc_handle(agent: number, address: bigint, outHandle: Uint8Array): number;
  kvt_mem_register(
    agent: number,
    address: bigint,
    length: bigint,
    kind: number,
    device: number,
    outRegion: Uint32Array,
  ): number;
  kvt_mem_register_fd(
    agent: number,
    address: bigint,
    length: bigint,
    fd: number,
    fileOffset: bigint,
    outRegion: Uint32Array,
  ): number;
  kvt_mem_deregister_begin(agent: number, region: number, outJob: BigUint64Array): number;
  kvt_agent_metadata(agent: number, buffer: Uint8Array | null, capacity: bigint, outLength: BigUint64Array): number;
  kvt_peer_load(
    agent: number,
    blob: Uint8Array,
    length: bigint,
    outPeer: Uint32Array,
    outGeneration: BigUint64Array,
  ): number;
  kvt_peer_load_begin(agent: number, blob: Uint8Array, length: bigint, outJob: BigUint64Array): number;
  kvt_peer_load_status(agent: number, job: bigint, outPeer: Uint32Array, outGeneration: BigUint64Array): number;
  kvt_peer_info(
    agent: number,
    peer: number,
    outGeneration: BigUint64Array,
    outState: Uint32Array,
    outRegionCount: Uint32Array,
  ): number;
  kvt_peer_regions(
    agent: number,
    peer: number,
    capacity: number,
    ids: Uint32Array,
    addresses: BigUint64Array,
    lengths: BigUint64Array,
    kinds: Uint32Array,
    devices: Uint32Array,
    outCount: Uint32Array,
  ): number;
  kvt_peer_transport(agent: number, peer: number, text: Uint8Array, capacity: number, outLength: Uint32Array): number;
  kvt_peer_name(agent: number, peer: number, name: Uint8Array, capacity: number): number;
  kvt_peer_watch(agent: number, peer: number, watched: number): number;
  kvt_peer_events_poll(
    agent: number,
    capacity: number,
    peerIds: Uint32Array,
    kinds: Uint32Array,
    silenceMs: BigUint64Array,
    outCount: Uint32Array,
  ): number;
  kvt_peer_invalidate(agent: number, peer: number): number;
  kvt_peer_unload(agent: number, peer: number): number;
  kvt_xfer_post(
    agent: number,
    direction: number,
    peer: number,
    peerGeneration: bigint,
    count: number,
    localIndex: Uint32Array,
    localOffset: BigUint64Array,
    remoteIndex: Uint32Array,
    remoteOffset: BigUint64Array,
    length: BigUint64Array,
    localRegionCount: number,
    localRegions: Uint32Array,
    remoteRegionCount: number,
    remoteRegions: Uint32Array,
    notification: Uint8Array | null,
    notificationLength: number,
    outOp: BigUint64Array,
  ): number;
  kvt_template_register(
    agent: number,
    peer: number,
    peerGeneration: bigint,
    routes: TemplateRoutes,
    outTemplate: Uint32Array,
  ): number;
  kvt_xfer_post_blocks(
    agent: number,
    templateId: number,
    direction: number,
    count: number,
    localBlocks: Uint32Array,
    remoteBlocks: Uint32Array,
    notification: Uint8Array | null,
    notificationLength: number,
    outOp: BigUint64Array,
  ): number;
  kvt_template_release(agent: number, templateId: number): number;
  kvt_mem_checksums(
    agent: number,
    pieceCount: number,
    regionIndex: Uint32Array,
    offset: BigUint64Array,
    length: BigUint64Array,
    group: Uint32Array,
    ordinal: Uint32Array,
    regionCount: number,
    regions: Uint32Array,
    groupCount: number,
    outSums: BigUint64Array,
  ): number;
  kvt_mem_block_checksums(
    agent: number,
    routes: BlockRoutes,
    blockCount: number,
    blocks: Uint32Array,
    outSums: BigUint64Array,
  ): number;
  kvt_xfer_status(
    agent: number,
    op: bigint,
    outStatus: Int32Array,
    outBytesDone: BigUint64Array,
    outBytesTotal: BigUint64Array,
  ): number;
  kvt_xfer_cancel(agent: number, op: bigint): number;
  kvt_xfer_release(agent: number, op: bigint): number;
  kvt_notify_send(agent: number, peer: number, peerGeneration: bigint, data: Uint8Array, length: number): number;
  kvt_notify_poll(
    agent: number,
    sender: Uint8Array,
    senderCapacity: number,
    data: Uint8Array,
    dataCapacity: number,
    outLength: Uint32Array,
    outGot: Uint32Array,
  ): number;
  kvt_counters(agent: number, values: BigUint64Array, capacity: number, outCount: Uint32Array): number;
  kvt_counter_name(index: number): string | null;
  kvt_fault_fail(agent: number, point: number, nth: number, code: number): number;
  kvt_fault_delay_completions(agent: number, ms: number): number;
  kvt_fault_stall_progress(agent: number, stalled: number): number;
  kvt_fault_heartbeat_rounds(agent: number, rounds: number): number;
  kvt_fault_clear(agent: number): number;
  kvt_sidecar_listen(path: string, outListener: Uint32Array): number;
  kvt_sidecar_wake_fd(listener: number, outFd: Int32Array): number;
  kvt_sidecar_poll(
    listener: number,
    outKind: Uint32Array,
    outConnection: Uint32Array,
    data: Uint8Array,
    capacity: number,
    outLength: Uint32Array,
    fds: Int32Array,
    outFdCount: Uint32Array,
    outGot: Uint32Array,
  ): number;
  kvt_sidecar_send(listener: number, connection: number, data: Uint8Array, length: number): number;
  kvt_sidecar_disconnect(listener: number, connection: number): number;
  kvt_sidecar_close(listener: number): number;
  kvt_sidecar_client_connect(path: string, outSocket: Int32Array): number;
  kvt_sidecar_client_send(
    socket: number,
    data: Uint8Array,
    length: number,
    fds: Int32Array | null,
    fdCount: number,
  ): number;
  kvt_sidecar_client_adopt(
    socket: number,
    memfd: number,
    layoutJson: string,
    answer: Uint8Array,
    capacity: number,
    timeoutMs: number,
  ): number;
  kvt_sidecar_client_recv(
    socket: number,
    data: Uint8Array,
    capacity: number,
    outLength: Uint32Array,
    timeoutMs: number,
  ): number;
  kvt_sidecar_client_close(socket: number): number;
}

const prototypes: { readonly [K in keyof NativeApi]: string } = {
  kvt_version: 'int32_t kvt_version(uint32_t *major, uint32_t *minor, uint32_t *patch)',
  kvt_version_string: 'const char *kvt_version_string(void)',
  kvt_last_error_detail: 'const char *kvt_last_error_detail(void)',
  kvt_thread_cpu_ns: 'uint64_t kvt_thread_cpu_ns(void)',
  kvt_thread_usage: 'int32_t kvt_thread_usage(uint64_t *values, uint32_t capacity)',
  kvt_strerror: 'const char *kvt_strerror(int32_t status)',
  kvt_capabilities: 'int32_t kvt_capabilities(uint64_t *values, uint32_t capacity, uint32_t *out_count)',
  kvt_capability_detail: 'const char *kvt_capability_detail(uint32_t cap)',
  kvt_agent_create: 'int32_t kvt_agent_create(const char *name, uint32_t backend, uint32_t flags, uint32_t *out_agent)',
  kvt_agent_create_begin:
    'int32_t kvt_agent_create_begin(const char *name, uint32_t backend, uint32_t flags, uint32_t *out_agent)',
  kvt_agent_create_ucx_begin:
    'int32_t kvt_agent_create_ucx_begin(const char *name, const char *net_devices, const char *transports, uint32_t *out_agent)',
  kvt_agent_start_status: 'int32_t kvt_agent_start_status(uint32_t agent)',
  kvt_agent_destroy: 'int32_t kvt_agent_destroy(uint32_t agent)',
  kvt_agent_shutdown: 'int32_t kvt_agent_shutdown(uint32_t agent, uint32_t deadline_ms)',
  kvt_agent_shutdown_status: 'int32_t kvt_agent_shutdown_status(uint32_t agent)',
  kvt_agent_wake_fd: 'int32_t kvt_agent_wake_fd(uint32_t agent, int32_t *out_fd)',
  kvt_agent_set_heartbeat: 'int32_t kvt_agent_set_heartbeat(uint32_t agent, uint32_t interval_ms, uint32_t misses)',
  kvt_agent_poll:
    'int32_t kvt_agent_poll(uint32_t agent, uint32_t capacity, uint64_t *op_ids, int32_t *statuses, uint64_t *bytes_done, uint32_t *out_count, uint32_t *out_pending)',
  kvt_mem_job_status: 'int32_t kvt_mem_job_status(uint32_t agent, uint64_t job)',
  kvt_mem_alloc_begin:
    'int32_t kvt_mem_alloc_begin(uint32_t agent, uint64_t length, uint32_t flags, uint64_t *out_address, uint64_t *out_job)',
  kvt_mem_free_begin: 'int32_t kvt_mem_free_begin(uint32_t agent, uint64_t address, uint64_t *out_job)',
  kvt_mem_alloc_vram:
    'int32_t kvt_mem_alloc_vram(uint32_t agent, uint32_t device, uint64_t length, uint64_t *out_address)',
  kvt_mem_write_vram:
    'int32_t kvt_mem_write_vram(uint32_t agent, uint64_t address, const uint8_t *source, uint64_t length)',
  kvt_mem_open_vram_ipc:
    'int32_t kvt_mem_open_vram_ipc(uint32_t agent, uint32_t device, const uint8_t *handle, uint64_t *out_address, uint64_t *out_length)',
  kvt_mem_vram_ipc_handle: 'int32_t kvt_mem_vram_ipc_handle(uint32_t agent, uint64_t address, uint8_t *out_handle)',
  kvt_mem_register:
    'int32_t kvt_mem_register(uint32_t agent, uint64_t address, uint64_t length, uint32_t kind, uint32_t device, uint32_t *out_region)',
  kvt_mem_register_fd:
    'int32_t kvt_mem_register_fd(uint32_t agent, uint64_t address, uint64_t length, int32_t fd, uint64_t file_offset, uint32_t *out_region)',
  kvt_mem_deregister_begin: 'int32_t kvt_mem_deregister_begin(uint32_t agent, uint32_t region, uint64_t *out_job)',
  kvt_agent_metadata:
    'int32_t kvt_agent_metadata(uint32_t agent, uint8_t *buffer, uint64_t capacity, uint64_t *out_length)',
  kvt_peer_load:
    'int32_t kvt_peer_load(uint32_t agent, const uint8_t *blob, uint64_t length, uint32_t *out_peer, uint64_t *out_generation)',
  kvt_peer_load_begin:
    'int32_t kvt_peer_load_begin(uint32_t agent, const uint8_t *blob, uint64_t length, uint64_t *out_job)',
  kvt_peer_load_status:
    'int32_t kvt_peer_load_status(uint32_t agent, uint64_t job, uint32_t *out_peer, uint64_t *out_generation)',
  kvt_peer_info:
    'int32_t kvt_peer_info(uint32_t agent, uint32_t peer, uint64_t *out_generation, uint32_t *out_state, uint32_t *out_region_count)',
  kvt_peer_regions:
    'int32_t kvt_peer_regions(uint32_t agent, uint32_t peer, uint32_t capacity, uint32_t *ids, uint64_t *addresses, ' +
    'uint64_t *lengths, uint32_t *kinds, uint32_t *devices, uint32_t *out_count)',
  kvt_peer_transport:
    'int32_t kvt_peer_transport(uint32_t agent, uint32_t peer, char *text, uint32_t capacity, uint32_t *out_length)',
  kvt_peer_name: 'int32_t kvt_peer_name(uint32_t agent, uint32_t peer, char *name, uint32_t capacity)',
  kvt_peer_watch: 'int32_t kvt_peer_watch(uint32_t agent, uint32_t peer, uint32_t watched)',
  kvt_peer_events_poll:
    'int32_t kvt_peer_events_poll(uint32_t agent, uint32_t capacity, uint32_t *peer_ids, uint32_t *kinds, uint64_t *silence_ms, uint32_t *out_count)',
  kvt_peer_invalidate: 'int32_t kvt_peer_invalidate(uint32_t agent, uint32_t peer)',
  kvt_peer_unload: 'int32_t kvt_peer_unload(uint32_t agent, uint32_t peer)',
  kvt_xfer_post:
    'int32_t kvt_xfer_post(uint32_t agent, uint32_t direction, uint32_t peer, uint64_t peer_generation, uint32_t count, ' +
    'const uint32_t *local_index, const uint64_t *local_offset, const uint32_t *remote_index, const uint64_t *remote_offset, ' +
    'const uint64_t *length, uint32_t local_region_count, const uint32_t *local_regions, uint32_t remote_region_count, ' +
    'const uint32_t *remote_regions, const uint8_t *notification, uint32_t notification_length, uint64_t *out_op)',
  kvt_template_register:
    'int32_t kvt_template_register(uint32_t agent, uint32_t peer, uint64_t peer_generation, const kvt_template_routes *routes, ' +
    'uint32_t *out_template)',
  kvt_xfer_post_blocks:
    'int32_t kvt_xfer_post_blocks(uint32_t agent, uint32_t template_id, uint32_t direction, uint32_t count, ' +
    'const uint32_t *local_blocks, const uint32_t *remote_blocks, const uint8_t *notification, uint32_t notification_length, uint64_t *out_op)',
  kvt_template_release: 'int32_t kvt_template_release(uint32_t agent, uint32_t template_id)',
  kvt_mem_checksums:
    'int32_t kvt_mem_checksums(uint32_t agent, uint32_t piece_count, const uint32_t *region_index, const uint64_t *offset, ' +
    'const uint64_t *length, const uint32_t *group, const uint32_t *ordinal, uint32_t region_count, const uint32_t *regions, ' +
    'uint32_t group_count, uint64_t *out_sums)',
  kvt_mem_block_checksums:
    'int32_t kvt_mem_block_checksums(uint32_t agent, const kvt_block_routes *routes, uint32_t block_count, ' +
    'const uint32_t *blocks, uint64_t *out_sums)',
  kvt_xfer_status:
    'int32_t kvt_xfer_status(uint32_t agent, uint64_t op, int32_t *out_status, uint64_t *out_bytes_done, uint64_t *out_bytes_total)',
  kvt_xfer_cancel: 'int32_t kvt_xfer_cancel(uint32_t agent, uint64_t op)',
  kvt_xfer_release: 'int32_t kvt_xfer_release(uint32_t agent, uint64_t op)',
  kvt_notify_send:
    'int32_t kvt_notify_send(uint32_t agent, uint32_t peer, uint64_t peer_generation, const uint8_t *data, uint32_t length)',
  kvt_notify_poll:
    'int32_t kvt_notify_poll(uint32_t agent, char *sender, uint32_t sender_capacity, uint8_t *data, uint32_t data_capacity, uint32_t *out_length, uint32_t *out_got)',
  kvt_counters: 'int32_t kvt_counters(uint32_t agent, uint64_t *values, uint32_t capacity, uint32_t *out_count)',
  kvt_counter_name: 'const char *kvt_counter_name(uint32_t index)',
  kvt_fault_fail: 'int32_t kvt_fault_fail(uint32_t agent, uint32_t point, uint32_t nth, int32_t code)',
  kvt_fault_delay_completions: 'int32_t kvt_fault_delay_completions(uint32_t agent, uint32_t ms)',
  kvt_fault_stall_progress: 'int32_t kvt_fault_stall_progress(uint32_t agent, uint32_t stalled)',
  kvt_fault_heartbeat_rounds: 'int32_t kvt_fault_heartbeat_rounds(uint32_t agent, uint32_t rounds)',
  kvt_fault_clear: 'int32_t kvt_fault_clear(uint32_t agent)',
  kvt_sidecar_listen: 'int32_t kvt_sidecar_listen(const char *path, uint32_t *out_listener)',
  kvt_sidecar_wake_fd: 'int32_t kvt_sidecar_wake_fd(uint32_t listener, int32_t *out_fd)',
  kvt_sidecar_poll:
    'int32_t kvt_sidecar_poll(uint32_t listener, uint32_t *out_kind, uint32_t *out_connection, uint8_t *data, uint32_t capacity, uint32_t *out_length, int32_t *fds, uint32_t *out_fd_count, uint32_t *out_got)',
  kvt_sidecar_send:
    'int32_t kvt_sidecar_send(uint32_t listener, uint32_t connection, const uint8_t *data, uint32_t length)',
  kvt_sidecar_disconnect: 'int32_t kvt_sidecar_disconnect(uint32_t listener, uint32_t connection)',
  kvt_sidecar_close: 'int32_t kvt_sidecar_close(uint32_t listener)',
  kvt_sidecar_client_connect: 'int32_t kvt_sidecar_client_connect(const char *path, int32_t *out_socket)',
  kvt_sidecar_client_send:
    'int32_t kvt_sidecar_client_send(int32_t socket, const uint8_t *data, uint32_t length, const int32_t *fds, uint32_t fd_count)',
  kvt_sidecar_client_adopt:
    'int32_t kvt_sidecar_client_adopt(int32_t socket, int32_t memfd, const char *layout_json, char *answer, uint32_t capacity, uint32_t timeout_ms)',
  kvt_sidecar_client_recv:
    'int32_t kvt_sidecar_client_recv(int32_t socket, uint8_t *data, uint32_t capacity, uint32_t *out_length, uint32_t timeout_ms)',
  kvt_sidecar_client_close: 'int32_t kvt_sidecar_client_close(int32_t socket)',
};

export interface NativeLibrary {
  readonly path: string;
  readonly api: NativeApi;
}

const loaded = new Map<string, NativeLibrary>();
/**
 * Opens the library at `path` (or the first default location that exists) once per process and
 * binds every function. Throws LibraryNotFoundError, LibraryLoadError or LibraryMismatchError.
 */
export function openLibrary(path: string | undefined): NativeLibrary {
  const candidates = path === undefined ? defaultLibraryPaths() : [resolve(path)];
  const found = candidates.find((candidate) => existsSync(candidate));
  if (found === undefined) throw new LibraryNotFoundError(candidates);
  const cached = loaded.get(found);
  if (cached !== undefined) return cached;

  // The one place library code touches process.env: UCX reads its settings from the environment when
  // libucs loads (with this library), and its defaults do not suit a Node process (see ucx-defaults.ts).
  // Settings the user made are kept.
  applyUcxDefaults(process.env);
  let handle: LibraryHandle;
  try {
    handle = koffi.load(found);
  } catch (cause) {
    throw new LibraryLoadError(found, cause);
  }
  const api = {} as Record<keyof NativeApi, unknown>;
  for (const [name, prototype] of Object.entries(prototypes) as [keyof NativeApi, string][]) {
    try {
      api[name] = withOffHeapArguments(handle.func(prototype), pointerParameters(prototype));
    } catch (cause) {
      throw new LibraryMismatchError(found, `symbol ${name}`, 'present', `missing (${String(cause)})`);
    }
  }
  registerApi(api, { ...api });
  const library: NativeLibrary = { path: found, api: api as unknown as NativeApi };
  checkApiVersion(library);
  loaded.set(found, library);
  return library;
}

/** The library's API version must be this facade's major and at least its minor. */
export function checkApiVersion(library: NativeLibrary): void {
  const [major, minor] = [new Uint32Array(1), new Uint32Array(1)];
  library.api.kvt_version(major, minor, new Uint32Array(1));
  if (major[0] !== API_MAJOR) throw new LibraryMismatchError(library.path, 'kvt_version() major', API_MAJOR, major[0]);
  if (minor[0]! < API_MINOR)
    throw new LibraryMismatchError(library.path, 'kvt_version() minor', `${API_MINOR} or later`, minor[0]);
}

/** The NativeTransportError for an error `status` of `call`, with the detail the library recorded on this thread. */
export function nativeError(library: NativeLibrary, call: string, status: number): NativeTransportError {
  return new NativeTransportError(statusCodeName(status), status, call, library.api.kvt_last_error_detail());
}

/** Throws the NativeTransportError for `status` when it is an error. */
export function check(library: NativeLibrary, call: string, status: number): void {
  if (status < 0) throw nativeError(library, call, status);
}
