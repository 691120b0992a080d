import { Socket } from 'node:net';
import { type Backend, backendIds } from './backend.js';
import { type Counters, readCounters } from './counters.js';
import { type BlockChecksumsRequest, blockChecksums } from './checksums.js';
import { ForeignHandleError, HandleClosedError, InvalidArgumentError, type NativeTransportError } from './errors.js';
import { Faults } from './faults.js';
import { type HeartbeatOptions, type PeerEvent, PeerEvents, validateHeartbeat } from './heartbeat.js';
import { confinement, type UcxConfinement } from './ucx-confinement.js';
import { type AgentContext, HandleState, toUint64 } from './handles.js';
import { duplicateFd } from './libc.js';
import { check, type NativeLibrary, nativeError } from './library.js';
import { Allocation, type MemoryRange, type Region, registerMemory, VRAM_IPC_HANDLE_BYTES } from './memory.js';
import { AgentJobs } from './agent-jobs.js';
import { Notifications, type Notification } from './notifications.js';
import { Operation } from './operation.js';
import { assertPeer, Peer } from './peer.js';
import { type PostBlocksRequest, RegisteredTemplate, type RegisterTemplateRequest } from './template.js';
import { postTransfer, type PostRequest } from './transfer.js';

export interface AgentOptions {
  /** 1–255 printable ASCII bytes without spaces, unique among this process's live agents. */
  readonly name: string;
  readonly backend: Backend;
  /** Probe interval and miss count of the heartbeat (`settings.transport` fits); the library's defaults (500 ms, 3) without it. */
  readonly heartbeat?: HeartbeatOptions;
  /**
   * For a `ucx` agent, the network devices and transports UCX may use (`transport.ucx_net_devices` and
   * `transport.ucx_transports`); ignored by `loopback`. Absent or empty leaves the choice to UCX's own
   * configuration (its `UCX_NET_DEVICES` / `UCX_TLS` environment, else every device and transport).
   */
  readonly ucx?: UcxConfinement;
}

export interface AllocateOptions {
  /** Lock the pages in RAM (refused with NOT_ALLOWED when RLIMIT_MEMLOCK does not allow it). */
  readonly mlock?: boolean;
}

export interface CloseOptions {
  /**
   * Milliseconds the peers get to acknowledge the closing of their endpoints (0..3,600,000; default
   * 2,000). Endpoints of peers that did not (a stopped or unreachable peer never does) are then
   * force-closed; the close still ends, within about a second after the deadline.
   */
  readonly deadlineMs?: number;
}

/** How a close ended. The agent is closed either way. */
export interface CloseOutcome {
  /**
   * Undefined when every endpoint closed gracefully; otherwise the NativeTransportError (code
   * `TIMEOUT`) whose detail names the agent and the peers whose endpoints were force-closed at the deadline,
   * or the vram the agent freed at the deadline while readers in other processes still had it open.
   */
  readonly forced: NativeTransportError | undefined;
}

const ALLOC_MLOCK = 1;
const DEFAULT_CLOSE_DEADLINE_MS = 2000;
const MAX_CLOSE_DEADLINE_MS = 3_600_000;
const STATUS_IN_PROGRESS = 1;
/** Completions dequeued per kvt_agent_poll call; a wake-up loops until the queue is empty. */
const POLL_CAPACITY = 1024;
/** kvt_agent_poll's pending bits (KVT_PENDING_* of kvreuse_transport.h). */
const PENDING_COMPLETIONS = 1;
const PENDING_NOTIFICATIONS = 2;
const PENDING_PEER_EVENTS = 4;

/**
 * A transport endpoint with its own native progress thread: it registers memory, exchanges metadata
 * with peers, posts batched transfers and sends and receives notifications.
 *
 * Completions reach JavaScript through the agent's wake-up pipe, read as a socket: each wake-up makes
 * one batched poll that settles every completed operation and says whether notifications or peer reports
 * are queued too; only then are those polled, so a wake-up for completions alone is one native call.
 * Nothing runs per operation, no thread and no timer; the socket keeps the process alive only while
 * operations are pending or someone awaits a notification.
 */
export class Agent {
  readonly name: string;
  readonly backend: Backend;
  readonly faults: Faults;
  readonly #library: NativeLibrary;
  readonly #id: number;
  readonly #state: HandleState;
  readonly #context: AgentContext;
  readonly #wake: Socket;
  readonly #notifications: Notifications;
  readonly #peerEvents: PeerEvents;
  /** Posted operations whose outcome has not been reported yet, by id. */
  readonly #pending = new Map<bigint, Operation>();
  /** Operations whose outcome the last completion poll delivered: the next one arms their leak warning. */
  readonly #delivered: Operation[] = [];
  /** How many of `#delivered` are not released yet: none (the usual case) spares the next poll the walk. */
  #deliveredUnreleased = 0;
  readonly #peers = new Map<number, Peer>();
  readonly #templates = new Set<RegisteredTemplate>();
  readonly #jobs: AgentJobs;
  readonly #opIds = new BigUint64Array(POLL_CAPACITY);
  readonly #statuses = new Int32Array(POLL_CAPACITY);
  readonly #bytesDone = new BigUint64Array(POLL_CAPACITY);
  readonly #count = new Uint32Array(1);
  readonly #pendingBits = new Uint32Array(1);
  /** Settles once the native agent reported its start (see create). */
  readonly #started: Promise<void>;
  #startEnded: ((error?: unknown) => void) | undefined;
  /** The close under way or done, once close() was accepted. */
  #closed: Promise<CloseOutcome> | undefined;
  #shutdownEnded: ((outcome: CloseOutcome) => void) | undefined;
  #shutdownFailed: ((error: unknown) => void) | undefined;

  private constructor(library: NativeLibrary, id: number, options: AgentOptions, wakeFd: number) {
    this.#library = library;
    this.#id = id;
    this.name = options.name;
    this.backend = options.backend;
    this.#state = new HandleState(this, 'Agent', JSON.stringify(options.name));
    this.#context = {
      library,
      id,
      name: options.name,
      assertOpen: (action) => this.#state.assertOpen(action),
      pollCompletions: () => this.#pollCompletions(),
      beginMemoryJob: (call, begin) => this.#jobs.begin({ call, begin }),
    };
    this.#jobs = new AgentJobs(library, id, () => this.#updateRef());
    this.faults = new Faults(this.#context);
    this.#notifications = new Notifications(this.#context, () => this.#updateRef());
    this.#peerEvents = new PeerEvents(
      this.#context,
      (id) => this.#peers.get(id),
      () => this.#updateRef(),
    );
    // Node owns (and closes) its own duplicate of the pipe; the library closes the original on destroy.
    this.#wake = new Socket({ fd: wakeFd, readable: true, writable: false });
    this.#wake.on('data', () => this.#onWake());
    this.#wake.on('error', (error) => process.emitWarning(`agent ${this.name}: wake-up pipe failed: ${error.message}`));
    this.#started = new Promise<void>((resolve, reject) => {
      this.#startEnded = (error) => (error === undefined ? resolve() : reject(error));
    });
    this.#checkStart();
  }

  /**
   * @internal Use transport.createAgent. The backend starts on the agent's own thread (UCX: tens of
   * milliseconds); the agent is handed out once it reported its start through the wake-up pipe.
   */
  static async create(library: NativeLibrary, options: AgentOptions): Promise<Agent> {
    if (!isObject(options)) throw new InvalidArgumentError('options', options, 'must be an object { name, backend }');
    if (typeof options.name !== 'string') throw new InvalidArgumentError('name', options.name, 'must be a string');
    if (!Object.hasOwn(backendIds, options.backend)) {
      throw new InvalidArgumentError(
        'backend',
        options.backend,
        `must be one of ${Object.keys(backendIds).join(', ')}`,
      );
    }
    const heartbeat = options.heartbeat === undefined ? undefined : validateHeartbeat(options.heartbeat);
    const ucx = options.backend === 'ucx' ? confinement(options.ucx) : undefined;
    const out = new Uint32Array(1);
    if (ucx === undefined)
      check(
        library,
        'kvt_agent_create_begin',
        library.api.kvt_agent_create_begin(options.name, backendIds[options.backend], 0, out),
      );
    else
      check(
        library,
        'kvt_agent_create_ucx_begin',
        library.api.kvt_agent_create_ucx_begin(options.name, ucx.netDevices, ucx.transports, out),
      );
    const id = out[0] ?? 0;
    let agent: Agent;
    try {
      const fd = new Int32Array(1);
      check(library, 'kvt_agent_wake_fd', library.api.kvt_agent_wake_fd(id, fd));
      agent = new Agent(library, id, options, duplicateFd(fd[0] ?? -1, `agent ${options.name}'s wake-up pipe`));
    } catch (error) {
      library.api.kvt_agent_destroy(id);
      throw error;
    }
    await agent.#started;
    if (heartbeat !== undefined) {
      // Once started: until then the agent is not live to the library's calls.
      const { heartbeatIntervalMs, heartbeatMisses } = heartbeat;
      try {
        check(
          library,
          'kvt_agent_set_heartbeat',
          library.api.kvt_agent_set_heartbeat(id, heartbeatIntervalMs, heartbeatMisses),
        );
      } catch (error) {
        await agent.close();
        throw error;
      }
    }
    return agent;
  }

  /** The native agent id (process-wide). */
  get id(): number {
    return this.#id;
  }

  get isOpen(): boolean {
    return this.#state.isOpen;
  }

  /**
   * Allocates page-aligned DRAM owned by this agent (not registered yet). Its pages are backed on the
   * agent's own thread (hundreds of megabytes take a tenth of a second), not on the JavaScript thread:
   * the allocation is handed out once they all are, or the promise rejects (NO_MEMORY when the system
   * cannot back them) with nothing left allocated. Until then the agent refuses to close (BUSY).
   */
  async allocate(bytes: number | bigint, options: AllocateOptions = {}): Promise<Allocation> {
    this.#state.assertOpen('allocate memory');
    const length = toUint64(bytes);
    if (length === undefined || length === 0n || length > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new InvalidArgumentError('bytes', bytes, 'must be a positive safe integer');
    }
    if (!isObject(options)) throw new InvalidArgumentError('options', options, 'must be an object { mlock? }');
    const address = new BigUint64Array(1);
    const flags = options.mlock === true ? ALLOC_MLOCK : 0;
    await this.#jobs.begin({
      call: 'kvt_mem_alloc',
      begin: (job) => this.#library.api.kvt_mem_alloc_begin(this.#id, length, flags, address, job),
    });
    return new Allocation(this.#context, address[0] ?? 0n, Number(length));
  }

  /**
   * Allocates device memory on GPU `device` owned by this agent (not registered yet), through the CUDA
   * driver the library loads at run time. Rejects with NOT_SUPPORTED naming what is missing where
   * `transport.capabilities().vram` is unsupported, INVALID_ARGUMENT/INVALID_PARAM for a GPU the driver
   * does not count, NO_MEMORY when the GPU has no room; nothing is left allocated then.
   */
  allocateVram(device: number, bytes: number | bigint): Allocation {
    this.#state.assertOpen('allocate memory');
    if (!Number.isInteger(device) || device < 0 || device > 0xffff_ffff)
      throw new InvalidArgumentError('device', device, 'must be a uint32 GPU ordinal');
    const length = toUint64(bytes);
    if (length === undefined || length === 0n || length > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new InvalidArgumentError('bytes', bytes, 'must be a positive safe integer');
    }
    const address = new BigUint64Array(1);
    check(this.#library, 'kvt_mem_alloc_vram', this.#library.api.kvt_mem_alloc_vram(this.#id, device, length, address));
    return new Allocation(this.#context, address[0] ?? 0n, Number(length), 'vram', device);
  }

  /**
   * Opens another process's GPU memory in this process: `handle` is the `VRAM_IPC_HANDLE_BYTES` bytes its
   * cuIpcGetMemHandle made of one of its cuMemAlloc allocations on GPU `device` (`Allocation.ipcHandle()`
   * of a kvreuse process). The result is an imported vram Allocation spanning the whole allocation; ranges
   * registered inside it carry the owner's handle, so readers open the owner's memory. Its `free()` closes
   * the mapping once no registration lies inside it; the owner keeps its memory. Throws BACKEND when the
   * driver refuses the handle (not one, its process gone, this process's own), NOT_SUPPORTED where vram is
   * unsupported; nothing is left open then.
   */
  openVramIpc(device: number, handle: Uint8Array): Allocation {
    this.#state.assertOpen('open vram');
    if (!Number.isInteger(device) || device < 0 || device > 0xffff_ffff)
      throw new InvalidArgumentError('device', device, 'must be a uint32 GPU ordinal');
    if (!(handle instanceof Uint8Array) || handle.length !== VRAM_IPC_HANDLE_BYTES)
      throw new InvalidArgumentError(
        'handle',
        handle,
        `must be the ${VRAM_IPC_HANDLE_BYTES} bytes of a CUDA IPC handle`,
      );
    const address = new BigUint64Array(1);
    const length = new BigUint64Array(1);
    check(
      this.#library,
      'kvt_mem_open_vram_ipc',
      this.#library.api.kvt_mem_open_vram_ipc(this.#id, device, handle, address, length),
    );
    return new Allocation(this.#context, address[0] ?? 0n, Number(length[0] ?? 0n), 'vram', device, true);
  }

  /**
   * Registers memory (an Allocation, or any range the caller keeps valid until it is deregistered).
   * Refuses zero length, overlap with a region of the same kind and device, and vram when unsupported.
   */
  register(memory: MemoryRange | Allocation): Region {
    this.#state.assertOpen('register memory');
    if (!isObject(memory))
      throw new InvalidArgumentError('memory', memory, 'must be an Allocation or { address, bytes, kind?, device? }');
    if (memory instanceof Allocation) {
      if (!memory.isOpen)
        throw new HandleClosedError('Allocation', `0x${memory.address.toString(16)}`, 'register memory');
      const { address, bytes, kind, device } = memory;
      return registerMemory(this.#context, { address, bytes, kind, device });
    }
    return registerMemory(this.#context, memory);
  }

  /** This agent's metadata blob (name, incarnation, generation, worker address, regions and keys), for peers. */
  metadata(): Buffer {
    this.#state.assertOpen('export metadata');
    const length = new BigUint64Array(1);
    check(this.#library, 'kvt_agent_metadata', this.#library.api.kvt_agent_metadata(this.#id, null, 0n, length));
    const blob = Buffer.alloc(Number(length[0]));
    check(
      this.#library,
      'kvt_agent_metadata',
      this.#library.api.kvt_agent_metadata(this.#id, blob, BigInt(blob.length), length),
    );
    return blob.subarray(0, Number(length[0]));
  }

  /**
   * Loads a peer's metadata. Loading newer metadata of a peer already loaded updates that same Peer
   * (and its generation). Malformed blobs are refused with INVALID_PARAM, another backend's with MISMATCH.
   */
  loadPeer(blob: Uint8Array): Peer {
    this.#state.assertOpen('load a peer');
    if (!(blob instanceof Uint8Array)) throw new InvalidArgumentError('blob', blob, 'must be a Uint8Array');
    const peerId = new Uint32Array(1);
    const generation = new BigUint64Array(1);
    check(
      this.#library,
      'kvt_peer_load',
      this.#library.api.kvt_peer_load(this.#id, blob, BigInt(blob.length), peerId, generation),
    );
    return this.#peerHandle(peerId[0] ?? 0, generation[0] ?? 0n);
  }

  /**
   * Loads a peer's metadata like `loadPeer`, on the agent's own thread: the JavaScript thread does not
   * wait while the agent connects (UCX: an endpoint and the peer's remote keys). A malformed blob or one
   * of another backend is refused at once (the promise rejects, nothing loaded); the blob may be reused
   * as soon as this returns. Loads run on the agent's thread in the order begun, after the memory jobs
   * begun before them. The promise rejects with the agent's `HandleClosedError` when the agent closed
   * before the load was answered.
   */
  async loadPeerInBackground(blob: Uint8Array): Promise<Peer> {
    this.#state.assertOpen('load a peer');
    if (!(blob instanceof Uint8Array)) throw new InvalidArgumentError('blob', blob, 'must be a Uint8Array');
    const peerId = new Uint32Array(1);
    const generation = new BigUint64Array(1);
    const api = this.#library.api;
    await this.#jobs.begin({
      call: 'kvt_peer_load',
      begin: (job) => api.kvt_peer_load_begin(this.#id, blob, BigInt(blob.length), job),
      answer: (job) => api.kvt_peer_load_status(this.#id, job, peerId, generation),
      atShutdown: () => new HandleClosedError('Agent', JSON.stringify(this.name), 'load a peer'),
    });
    return this.#peerHandle(peerId[0] ?? 0, generation[0] ?? 0n);
  }

  /** The handle of a peer the library loaded: the known one (now at `generation`), or a new one. */
  #peerHandle(id: number, generation: bigint): Peer {
    const known = this.#peers.get(id);
    if (known !== undefined) {
      known.reloaded(generation);
      return known;
    }
    const peer = new Peer(this.#context, id, generation, (unloaded) => this.#peers.delete(unloaded.id));
    this.#peers.set(id, peer);
    return peer;
  }

  /** The peers loaded on this agent and not unloaded, in the order they were first loaded. */
  peers(): Peer[] {
    return [...this.#peers.values()];
  }

  /** Posts one batch as one operation. Nothing moves when any descriptor is out of bounds (INVALID_PARAM). */
  post(request: PostRequest): Operation {
    this.#state.assertOpen('post a transfer');
    if (!isObject(request))
      throw new InvalidArgumentError(
        'request',
        request,
        'must be an object { direction, peer, descriptors, localRegions, remoteRegions, notification? }',
      );
    const { id, count } = postTransfer(this.#context, request);
    const operation = new Operation(this.#context, id, count, this.#onOperationReleased);
    this.#pending.set(id, operation);
    this.#updateRef();
    return operation;
  }

  /**
   * Registers one rank pair of a transfer template (`buildTransferTemplate` of `@kvreuse/descriptors`)
   * against the peer's current generation. Every route is bounds-checked once, natively, at the largest
   * block of each side (INVALID_PARAM naming the route, region and bound); posts then carry only block lists.
   */
  registerTemplate(request: RegisterTemplateRequest): RegisteredTemplate {
    this.#state.assertOpen('register a transfer template');
    if (!isObject(request))
      throw new InvalidArgumentError(
        'request',
        request,
        'must be an object { peer, template, direction, localRegions, remoteRegions, pair? }',
      );
    const registered = RegisteredTemplate.register(this.#context, request, (released) =>
      this.#templates.delete(released),
    );
    this.#templates.add(registered);
    return registered;
  }

  /**
   * Posts one request by block lists on a registered template, as one operation: the lists are checked
   * (`prepareTransfer`) and handed to the native layer as they are; no descriptor is built in JavaScript.
   * The operation's `descriptorCount` is the number of block pairs.
   */
  postBlocks(request: PostBlocksRequest): Operation {
    this.#state.assertOpen('post a transfer');
    if (!isObject(request))
      throw new InvalidArgumentError(
        'request',
        request,
        'must be an object { template, sourceBlocks, destinationBlocks }',
      );
    const { template } = request;
    if (!(template instanceof RegisteredTemplate)) {
      throw new InvalidArgumentError('template', template, 'must be a RegisteredTemplate from agent.registerTemplate');
    }
    if (!template.belongsTo(this.#context)) throw new ForeignHandleError('RegisteredTemplate', 'template', this.name);
    const id = template.post(request);
    const operation = new Operation(this.#context, id, request.sourceBlocks.length, this.#onOperationReleased);
    this.#pending.set(id, operation);
    this.#updateRef();
    return operation;
  }

  /**
   * The 64-bit checksum of each of `request.blocks` over a template pair's routes on one side, in this
   * agent's regions: by the GPU's checksum kernel for vram (the bytes never leave the GPU), on the host by
   * the same function for dram. Equal on both sides of a pull exactly when every row moved to its place.
   */
  blockChecksums(request: BlockChecksumsRequest): BigUint64Array {
    this.#state.assertOpen('compute checksums');
    if (!isObject(request))
      throw new InvalidArgumentError('request', request, 'must be an object { template, side, regions, blocks }');
    return blockChecksums(this.#context, request);
  }

  /**
   * Sends 1..maxNotificationBytes bytes (a string is sent as UTF-8) to a peer, in order with the others sent
   * to it. Never waits for the agent's thread: UCX queues a copy that the thread sends; a failure after this
   * returned (the connection failed meanwhile) is only counted. Throws REMOTE_DISCONNECT when the
   * connection had failed.
   */
  sendNotification(peer: Peer, data: Uint8Array | string): void {
    this.#state.assertOpen('send a notification');
    assertPeer(peer);
    if (!peer.belongsTo(this.#context)) throw new ForeignHandleError('Peer', String(peer.id), this.name);
    this.#notifications.send(peer, data);
  }

  /**
   * Delivers now what the library holds for this agent, as its next wake-up would: completions settle their
   * operations, and notifications and peer reports go to those waiting for them (else are kept). For a deadline
   * judged after the JavaScript thread was held (a long synchronous call, a loaded machine): what arrived in time
   * is seen before the deadline is. Nothing is delivered on a closed agent.
   */
  deliverPending(): void {
    if (this.#state.isOpen && this.#closed === undefined && this.#startEnded === undefined) this.#deliver();
  }

  /** Every notification received and not yet taken, oldest first. */
  pollNotifications(): Notification[] {
    this.#state.assertOpen('poll notifications');
    return this.#notifications.takeAll();
  }

  /** The next notification, waiting for one to arrive (rejects with HandleClosedError if the agent closes first). */
  nextNotification(): Promise<Notification> {
    this.#state.assertOpen('wait for a notification');
    return this.#notifications.next();
  }

  /** Every notification as it arrives, until the agent closes (then the iteration ends). */
  notifications(): AsyncGenerator<Notification, void, undefined> {
    return this.#untilClosed(() => this.nextNotification());
  }

  /** Every heartbeat report (`peer-unresponsive`, `peer-responsive`) received and not yet taken, oldest first. */
  pollPeerEvents(): PeerEvent[] {
    this.#state.assertOpen('poll peer events');
    return this.#peerEvents.takeAll();
  }

  /** The next heartbeat report, waiting for one (rejects with HandleClosedError if the agent closes first). */
  nextPeerEvent(): Promise<PeerEvent> {
    this.#state.assertOpen('wait for a peer event');
    return this.#peerEvents.next();
  }

  /**
   * Every heartbeat report as it arrives, until the agent closes: `peer-unresponsive` when a peer with
   * transfers in flight or watched (`peer.watch()`) answered nothing for the heartbeat's miss count of
   * intervals, its connection failed or its process ended; `peer-responsive` when it answers again or is
   * loaded again (a new connection, judged afresh). `cause` says which. A report changes nothing by itself.
   */
  peerEvents(): AsyncGenerator<PeerEvent, void, undefined> {
    return this.#untilClosed(() => this.nextPeerEvent());
  }

  async *#untilClosed<T>(next: () => Promise<T>): AsyncGenerator<T, void, undefined> {
    while (this.#state.isOpen) {
      try {
        yield await next();
      } catch (error) {
        if (error instanceof HandleClosedError && !this.#state.isOpen) return;
        throw error;
      }
    }
  }

  /** This agent's counters (live registrations, operations, bytes moved, errors per code, …). */
  counters(): Counters {
    this.#state.assertOpen('read counters');
    return readCounters(this.#library, this.#id);
  }

  /**
   * Closes the agent: its peers are forgotten, their endpoints closed (gracefully until the deadline,
   * then by force), its progress thread ends and the agent is destroyed. Nothing of it blocks the
   * JavaScript thread: the native side works on the agent's own thread and reports through the
   * wake-up pipe. Refused with BUSY (and nothing changes) while registrations, allocations or
   * unreleased operations remain. Deregistrations and frees still under way do not hold it back: the
   * agent's thread finishes them first, and their promises resolve with the close. Once accepted the
   * agent is closed to every other call. Closing a closed agent resolves as the first close did.
   */
  close(options: CloseOptions = {}): Promise<CloseOutcome> {
    if (this.#closed !== undefined) return this.#closed;
    if (!this.#state.isOpen) return Promise.resolve({ forced: undefined });
    try {
      const deadlineMs = closeDeadline(options);
      check(this.#library, 'kvt_agent_shutdown', this.#library.api.kvt_agent_shutdown(this.#id, deadlineMs));
    } catch (error) {
      return Promise.reject(error);
    }
    this.#closed = new Promise<CloseOutcome>((resolve, reject) => {
      this.#shutdownEnded = resolve;
      this.#shutdownFailed = reject;
    });
    this.#state.markClosed();
    for (const peer of this.#peers.values()) peer.closedWithAgent();
    this.#peers.clear();
    for (const template of this.#templates) template.closedWithAgent();
    this.#templates.clear();
    this.#notifications.close(new HandleClosedError('Agent', JSON.stringify(this.name), 'wait for a notification'));
    this.#peerEvents.close(new HandleClosedError('Agent', JSON.stringify(this.name), 'wait for a peer event'));
    this.#wake.ref(); // the close keeps the process alive until it ends
    this.#checkShutdown();
    return this.#closed;
  }

  /** Until the start is reported: once it is, the agent is usable, or (its start failed) destroyed. */
  #checkStart(): void {
    const ended = this.#startEnded;
    if (ended === undefined) return;
    const status = this.#library.api.kvt_agent_start_status(this.#id);
    if (status === STATUS_IN_PROGRESS) return;
    this.#startEnded = undefined;
    if (status >= 0) {
      this.#updateRef();
      ended();
      return;
    }
    const error = nativeError(this.#library, 'kvt_agent_create_begin', status);
    this.#state.markClosed();
    this.#wake.destroy();
    this.#library.api.kvt_agent_destroy(this.#id); // only a join: the thread ended with the failed start
    ended(error);
  }

  #onWake(): void {
    if (this.#startEnded !== undefined) {
      this.#checkStart();
      return;
    }
    if (this.#closed !== undefined) {
      this.#checkShutdown();
      return;
    }
    if (!this.#state.isOpen) return;
    this.#jobs.check();
    this.#deliver();
  }

  #deliver(): void {
    const pending = this.#pollCompletions();
    // A bit left unread would lose nothing (the poll wrote a byte for it: the next wake-up polls again); read
    // here, it spares that wake-up.
    if ((pending & PENDING_NOTIFICATIONS) !== 0) this.#notifications.drain();
    if ((pending & PENDING_PEER_EVENTS) !== 0) this.#peerEvents.drain();
  }

  /** After a wake-up during a close: once the shutdown ended, destroys the agent (only a join now). */
  #checkShutdown(): void {
    const resolve = this.#shutdownEnded;
    const reject = this.#shutdownFailed;
    if (resolve === undefined || reject === undefined) return;
    const status = this.#library.api.kvt_agent_shutdown_status(this.#id);
    if (status === STATUS_IN_PROGRESS) return;
    const forced = status < 0 ? nativeError(this.#library, 'kvt_agent_shutdown', status) : undefined;
    this.#shutdownEnded = this.#shutdownFailed = undefined;
    this.#jobs.settleAllDone();
    this.#wake.destroy();
    try {
      if (forced !== undefined && forced.code !== 'TIMEOUT') throw forced;
      check(this.#library, 'kvt_agent_destroy', this.#library.api.kvt_agent_destroy(this.#id));
      resolve({ forced });
    } catch (error) {
      reject(error);
    }
  }

  readonly #onOperationReleased = (released: Operation): void => {
    this.#pending.delete(released.id);
    if (!released.awaitingArm) return;
    this.#deliveredUnreleased -= 1;
    // All released: nothing is left to arm, and holding thousands of them to the next poll would keep them
    // alive through the collections until then.
    if (this.#deliveredUnreleased === 0) this.#delivered.length = 0;
  };

  /** Settles every completed operation; returns the native poll's pending bits for the other queues. */
  #pollCompletions(): number {
    if (!this.#state.isOpen) return 0;
    // Walking thousands of released operations costs tenths of a millisecond in cache misses alone.
    if (this.#deliveredUnreleased > 0) for (const operation of this.#delivered) operation.armLeakWarning();
    this.#delivered.length = 0;
    this.#deliveredUnreleased = 0;
    for (;;) {
      check(
        this.#library,
        'kvt_agent_poll',
        this.#library.api.kvt_agent_poll(
          this.#id,
          POLL_CAPACITY,
          this.#opIds,
          this.#statuses,
          this.#bytesDone,
          this.#count,
          this.#pendingBits,
        ),
      );
      const count = this.#count[0] ?? 0;
      for (let i = 0; i < count; i++) {
        const id = this.#opIds[i] ?? 0n;
        const operation = this.#pending.get(id);
        if (operation === undefined) continue;
        this.#pending.delete(id);
        operation.settle(this.#statuses[i] ?? 0, Number(this.#bytesDone[i]));
        operation.markDelivered();
        this.#delivered.push(operation);
        this.#deliveredUnreleased += 1;
      }
      if (((this.#pendingBits[0] ?? 0) & PENDING_COMPLETIONS) === 0) break;
    }
    this.#updateRef();
    return this.#pendingBits[0] ?? 0;
  }

  #updateRef(): void {
    const waiting = this.#pending.size > 0 || this.#jobs.hasPending;
    if (waiting || this.#notifications.hasWaiters || this.#peerEvents.hasWaiters) this.#wake.ref();
    else this.#wake.unref();
  }
}

function closeDeadline(options: CloseOptions): number {
  if (!isObject(options)) throw new InvalidArgumentError('options', options, 'must be an object { deadlineMs? }');
  const deadlineMs = options.deadlineMs ?? DEFAULT_CLOSE_DEADLINE_MS;
  if (!Number.isSafeInteger(deadlineMs) || deadlineMs < 0 || deadlineMs > MAX_CLOSE_DEADLINE_MS) {
    throw new InvalidArgumentError('deadlineMs', deadlineMs, `must be an integer from 0 to ${MAX_CLOSE_DEADLINE_MS}`);
  }
  return deadlineMs;
}

function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}
