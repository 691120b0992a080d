// A kvreuse sidecar serving an engine's own KV memory (docs/engines.md): engines connect to its unix
// socket and hand over their memory with its layout — host memory as a memfd, or GPU memory as a CUDA IPC
// handle; the sidecar maps or opens it, registers and publishes it as one rank of the engine's worker (a
// serving ReuseEndpoint on an agent of its own) and serves pins and verified pulls for it. The engine stays
// the owner. When its connection ends (closed, or the engine died) the sidecar fails held and new pins as
// `engine-gone`, withdraws the rank part and inventory, deregisters (which fences readers still in flight),
// drops its own mapping (unmaps the memfd, closes the IPC mapping) and closes its agent.
import { randomBytes } from 'node:crypto';
import type { SettingsOf } from '@kvreuse/config';
import { layoutRankBanks } from '@kvreuse/descriptors';
import { codeOf, messageOf } from '@kvreuse/errors';
import type { ClusterSecret, DiscoveryStore, discoveryGroup, ReadinessGate } from '@kvreuse/discovery';
import type { drainGroup } from '@kvreuse/drain';
import {
  type Agent,
  type Backend,
  closeReceivedFds,
  FileMemory,
  type SidecarEvent,
  type SidecarListener,
  type Transport,
  type transportGroup,
} from '@kvreuse/native-bindings';
import { type BlockHashScheme, blockHashScheme, type inventoryGroup } from '@kvreuse/inventory';
import { Bank, frameworkOwner } from '@kvreuse/registry';
import { type AdoptedMemory, importedVram, mappedMemfd } from './adopted-memory.js';
import {
  type AdoptLayout,
  adoptedAnswer,
  type AdoptionRefusal,
  adoptionRefusals,
  chainStored,
  parseEngineMessage,
  refusedAnswer,
  type StoredBlock,
} from './adoption-messages.js';
import { EngineBlocks } from './engine-blocks.js';
import { describeRank } from './errors.js';
import { ReuseEndpoint } from './reuse-endpoint.js';
import type { endpointGroup } from './settings.js';

export interface EngineSidecarOptions {
  readonly transport: Transport;
  /** Where the socket is bound (it must not exist; mode 0600, removed at `close()`). */
  readonly path: string;
  readonly discovery: DiscoveryStore;
  readonly secret: ClusterSecret;
  readonly settings: SettingsOf<[typeof transportGroup, typeof discoveryGroup]> &
    Partial<SettingsOf<[typeof drainGroup, typeof endpointGroup, typeof inventoryGroup]>>;
  /** The backend of each adopted rank's agent: `ucx` (readers in other processes) by default. */
  readonly backend?: Backend;
  /** How long the retained inventory of an adopted rank 0 lives between announcements (60 s by default). */
  readonly inventoryTtlMs?: number;
  /** How long a withdrawal waits for the sidecar's own operations before quarantining them (10 s by default). */
  readonly withdrawDeadlineMs?: number;
  /** The host published in rank parts (`thisHost()` by default, as `ReuseEndpointOptions.host`). */
  readonly host?: string | null;
  readonly keyPrefix?: string;
  /**
   * The profile-admission gate GPU memory is served behind (its readers are gated on it too): without it the
   * sidecar refuses `vram` adoptions as `vram-not-supported`.
   */
  readonly admissionGate?: ReadinessGate;
  /** Told what happens to each engine: adopted, refused, withdrawn. */
  readonly onReport?: (report: SidecarReport) => void;
}

export type SidecarReport =
  | { readonly kind: 'connected'; readonly connection: number; readonly pid: number }
  | {
      readonly kind: 'adopted';
      readonly connection: number;
      readonly workerId: string;
      readonly incarnation: string;
      readonly epoch: number;
      readonly banks: number;
    }
  | { readonly kind: 'refused'; readonly connection: number; readonly reason: AdoptionRefusal; readonly detail: string }
  | {
      readonly kind: 'withdrawn';
      readonly connection: number;
      readonly workerId: string;
      /** Pins held when the engine went, revoked as `engine-gone`. */
      readonly pinsRevoked: number;
      readonly banksReturned: number;
      readonly banksRetained: number;
      /** Whether the sidecar's mapping of the engine's memory (memfd or IPC) is gone (false while a bank is retained). */
      readonly unmapped: boolean;
      /** Why the withdrawal stopped short (its endpoint's close failed), when it did. */
      readonly failure?: string;
    };

/** One engine rank the sidecar serves. */
export interface AdoptedEngine {
  readonly connection: number;
  readonly workerId: string;
  readonly incarnation: string;
  readonly endpoint: ReuseEndpoint;
  readonly blocks: EngineBlocks;
}

/** An adopt's layout with its incarnation: the engine's own, or drawn by the sidecar. */
type IncarnatedLayout = AdoptLayout & { readonly incarnation: string };

interface Connection {
  readonly id: number;
  /** Its events, handled one after another. */
  chain: Promise<void>;
  adopted:
    | (AdoptedEngine & {
        readonly memory: AdoptedMemory;
        readonly blocksPerBank: number;
        /** How the engine's token sequences are hashed into the chain hashes readers pin by. */
        readonly scheme: BlockHashScheme;
        /** Its worker, incarnation and rank, as #ranks holds them. */
        readonly rankKey: string;
      })
    | undefined;
}

let sequence = 0;

/** The incarnation of an engine that names none: a restarted engine is a new one. */
const drawIncarnation = (workerId: string) => `${workerId}-${randomBytes(6).toString('hex')}`;

export class EngineSidecar {
  readonly #options: EngineSidecarOptions;
  readonly #listener: SidecarListener;
  readonly #connections = new Map<number, Connection>();
  /** The ranks (worker, incarnation, rank) adopted or being adopted, each by one connection. */
  readonly #ranks = new Set<string>();
  #closing: Promise<void> | undefined;

  constructor(options: EngineSidecarOptions) {
    this.#options = options;
    this.#listener = options.transport.listenSidecar(options.path, (event) => this.#onEvent(event));
  }

  get path(): string {
    return this.#listener.path;
  }

  /** The engine ranks served now. */
  get engines(): readonly AdoptedEngine[] {
    return [...this.#connections.values()].flatMap(({ adopted }) => (adopted === undefined ? [] : [adopted]));
  }

  /** Withdraws every adopted engine as if it had gone, then closes the socket. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const connections = [...this.#connections.values()];
      for (const connection of connections) connection.chain = connection.chain.then(() => this.#withdraw(connection));
      await Promise.all(connections.map(({ chain }) => chain));
      this.#listener.close();
    })();
    return this.#closing;
  }

  #onEvent(event: SidecarEvent): void {
    let connection = this.#connections.get(event.connection);
    if (connection === undefined) {
      connection = { id: event.connection, chain: Promise.resolve(), adopted: undefined };
      this.#connections.set(event.connection, connection);
    }
    const handled = connection;
    handled.chain = handled.chain.then(() => this.#handle(handled, event)).catch(() => undefined);
  }

  async #handle(connection: Connection, event: SidecarEvent): Promise<void> {
    if (event.kind === 'connected') this.#report({ kind: 'connected', connection: connection.id, pid: event.pid });
    else if (event.kind === 'malformed') {
      const reason = (adoptionRefusals as readonly string[]).includes(event.reason) ? event.reason : 'malformed-json';
      this.#refuse(connection, reason as AdoptionRefusal, event.detail);
    } else if (event.kind === 'closed') {
      await this.#withdraw(connection);
      this.#connections.delete(connection.id);
    } else await this.#message(connection, event.data, event.fds);
  }

  async #message(connection: Connection, data: Buffer, fds: readonly number[]): Promise<void> {
    const parsed = parseEngineMessage(data, fds.length);
    if (!parsed.ok || this.#closing !== undefined) {
      closeReceivedFds(fds);
      if (!parsed.ok) this.#refuse(connection, parsed.reason, parsed.detail);
      else this.#refuse(connection, 'adoption-failed', 'the sidecar is closing');
      return;
    }
    const { message } = parsed;
    if (message.type === 'blocks') {
      if (connection.adopted === undefined) return this.#refuse(connection, 'not-adopted', 'blocks before adopt');
      const { blocksPerBank, scheme } = connection.adopted;
      const outside = [...message.stored.map(({ block }) => block), ...message.removed].find(
        (block) => block >= blocksPerBank,
      );
      if (outside !== undefined) return this.#refuse(connection, 'bad-blocks', `block ${outside} is outside the banks`);
      const chained = chainStored(message.sequences, scheme, blocksPerBank);
      if (typeof chained === 'string') return this.#refuse(connection, 'bad-blocks', chained);
      connection.adopted.blocks.remove(message.removed);
      connection.adopted.blocks.store([...message.stored, ...chained]);
      return;
    }
    if (connection.adopted !== undefined) {
      closeReceivedFds(fds);
      return this.#refuse(connection, 'already-adopted', 'this connection already handed over its memory');
    }
    const scheme = this.#schemeOf(message.layout);
    const chained = chainStored(message.sequences, scheme, message.layout.blocks);
    if (typeof chained === 'string') {
      closeReceivedFds(fds);
      return this.#refuse(connection, 'bad-blocks', chained);
    }
    const { workerId, tpRank, ppRank } = message.layout;
    const layout = { ...message.layout, incarnation: message.layout.incarnation ?? drawIncarnation(workerId) };
    const rankKey = JSON.stringify([workerId, layout.incarnation, tpRank, ppRank]);
    if (this.#ranks.has(rankKey)) {
      closeReceivedFds(fds);
      const rank = `worker ${workerId} incarnation ${layout.incarnation}, rank ${describeRank({ tpRank, ppRank })},`;
      return this.#refuse(
        connection,
        'already-adopted',
        `${rank} is adopted by another connection, which serves it on`,
      );
    }
    // Claimed before the first wait: a connection adopting the same rank meanwhile is refused too.
    this.#ranks.add(rankKey);
    try {
      await this.#adopt(connection, layout, rankKey, [...message.stored, ...chained], fds[0]);
    } finally {
      if (connection.adopted === undefined) this.#ranks.delete(rankKey);
    }
  }

  /** Why this sidecar cannot adopt the engine's GPU memory (no admission gate, no usable driver), if it cannot. */
  #vramRefusal(layout: AdoptLayout): [AdoptionRefusal, string] | undefined {
    if (layout.memory.kind !== 'vram') return undefined;
    if (this.#options.admissionGate === undefined)
      return ['vram-not-supported', 'this sidecar serves no GPU memory: it was given no profile-admission gate'];
    const vram = this.#options.transport.capabilities().vram;
    return vram.supported ? undefined : ['vram-unavailable', vram.reason];
  }

  /** The engine's memory mapped (memfd) or opened (CUDA IPC) by a new agent of the rank, or undefined once refused. */
  async #open(
    connection: Connection,
    layout: AdoptLayout,
    fd: number | undefined,
  ): Promise<{ memory: AdoptedMemory; agent: Agent } | undefined> {
    const refusal = this.#vramRefusal(layout);
    if (refusal !== undefined) return void this.#refuse(connection, ...refusal);
    let memory: AdoptedMemory | undefined;
    try {
      if (layout.memory.kind === 'dram') memory = mappedMemfd(FileMemory.map(fd as number));
    } catch (error) {
      return void this.#refuse(connection, 'bad-memfd', (error as Error).message);
    }
    let agent: Agent;
    try {
      agent = await this.#createAgent(layout);
    } catch (error) {
      await memory?.close();
      return void this.#refuse(connection, 'adoption-failed', (error as Error).message);
    }
    if (layout.memory.kind === 'dram') return { memory: memory as AdoptedMemory, agent };
    try {
      return { memory: importedVram(agent.openVramIpc(layout.memory.device, layout.memory.ipcHandle)), agent };
    } catch (error) {
      await agent.close();
      // The driver refused the handle (BACKEND); anything else is this machine's (no such GPU here).
      const reason = codeOf(error) === 'BACKEND' ? 'bad-ipc-handle' : 'vram-unavailable';
      return void this.#refuse(connection, reason, (error as Error).message);
    }
  }

  async #adopt(
    connection: Connection,
    layout: IncarnatedLayout,
    rankKey: string,
    stored: readonly StoredBlock[],
    fd: number | undefined,
  ): Promise<void> {
    const opened = await this.#open(connection, layout, fd);
    if (opened === undefined) return;
    const { memory, agent } = opened;
    const refuse = async (reason: AdoptionRefusal, detail: string) => {
      await memory.close();
      await agent.close();
      this.#refuse(connection, reason, detail);
    };
    let specs: ReturnType<typeof layoutRankBanks>;
    try {
      specs = layoutRankBanks(
        layout.geometry,
        { tpRank: layout.tpRank, tpSize: layout.tpSize, ppRank: layout.ppRank, ppSize: layout.ppSize },
        {
          address: memory.address + BigInt(layout.start),
          blocks: layout.blocks,
          memKind: memory.kind,
          deviceId: memory.device,
          ...(layout.blockStride === undefined ? {} : { blockStride: layout.blockStride }),
          ...(layout.planeStride === undefined ? {} : { planeStride: layout.planeStride }),
        },
      );
    } catch (error) {
      return refuse('bad-layout', (error as Error).message);
    }
    const end = specs.reduce((last, bank) => (bank.address + bank.bytes > last ? bank.address + bank.bytes : last), 0n);
    if (end - memory.address > BigInt(memory.bytes)) {
      const needed = end - memory.address;
      const holder = memory.kind === 'dram' ? 'the memfd' : "the engine's GPU allocation";
      return refuse('too-small', `the layout needs ${needed} bytes, ${holder} holds ${memory.bytes}`);
    }
    await this.#serve(connection, layout, rankKey, stored, opened, specs);
  }

  async #serve(
    connection: Connection,
    layout: IncarnatedLayout,
    rankKey: string,
    stored: readonly StoredBlock[],
    { memory, agent }: { memory: AdoptedMemory; agent: Agent },
    specs: ReturnType<typeof layoutRankBanks>,
  ): Promise<void> {
    const blocks = new EngineBlocks();
    blocks.store(stored);
    // Each bank handed back drops a hold on the mapping; the last one drops it (never while a bank is retained),
    // before the agent that opened it closes.
    let returned = 0;
    const release = async () => {
      returned += 1;
      if (returned === specs.length && memory.isOpen) await memory.close();
    };
    const { tpRank, ppRank, workerId, incarnation } = layout;
    const offsetOf = (address: bigint) => Number(address - memory.address);
    // Host memory is registered with the memfd: readers on this host copy out of the engine's file at memory speed.
    const { fd } = memory;
    const banks = specs.map((spec, index) =>
      Bank.adopt(
        {
          ...spec,
          tpRank,
          ppRank,
          index,
          ...(fd === undefined ? {} : { file: { fd, offset: offsetOf(spec.address) } }),
        },
        frameworkOwner({ engine: connection.id, index }, release),
      ),
    );
    const bankBytes = specs.flatMap((spec) => memory.bytesAt(offsetOf(spec.address), Number(spec.bytes)) ?? []);
    let endpoint: ReuseEndpoint | undefined;
    try {
      endpoint = this.#openEndpoint(layout, agent, memory.kind, banks, bankBytes, blocks);
      await endpoint.register();
      await endpoint.publish();
    } catch (error) {
      await endpoint?.close().catch(() => undefined);
      if (memory.isOpen && returned === 0) await memory.close();
      if (endpoint === undefined) await agent.close();
      return this.#refuse(connection, 'adoption-failed', (error as Error).message);
    }
    const { id } = connection;
    connection.adopted = {
      connection: id,
      workerId,
      incarnation,
      endpoint,
      blocks,
      memory,
      blocksPerBank: layout.blocks,
      scheme: this.#schemeOf(layout),
      rankKey,
    };
    const placed = specs.map((spec) => ({ offset: offsetOf(spec.address), bytes: Number(spec.bytes) }));
    this.#send(connection, adoptedAnswer(workerId, incarnation, placed));
    const epoch = endpoint.epoch ?? 0;
    this.#report({ kind: 'adopted', connection: id, workerId, incarnation, epoch, banks: specs.length });
  }

  /** The agent of an adopted rank: its own, which registers (and for vram opens) the engine's memory. */
  #createAgent(layout: AdoptLayout): Promise<Agent> {
    const { tpRank, ppRank } = layout;
    sequence += 1;
    return this.#options.transport.createAgent({
      name: `sidecar-${layout.workerId}-tp${tpRank}pp${ppRank}-${process.pid}-${sequence}`,
      backend: this.#options.backend ?? 'ucx',
    });
  }

  /**
   * The serving endpoint of an adopted rank on its agent; rank 0 publishes the retained inventory (tier
   * `gpu` for vram). Vram banks are served behind the admission gate.
   */
  #openEndpoint(
    layout: IncarnatedLayout,
    agent: Agent,
    kind: AdoptedMemory['kind'],
    banks: Bank[],
    bankBytes: Uint8Array[],
    blocks: EngineBlocks,
  ): ReuseEndpoint {
    const { discovery, secret, settings, keyPrefix, host, admissionGate } = this.#options;
    const { tpRank, ppRank } = layout;
    const ttlMs = this.#options.inventoryTtlMs ?? 60_000;
    const tier = kind === 'vram' ? ('gpu' as const) : ('host' as const);
    const inventory = { tier, retained: () => blocks.retained(), ttlMs };
    return new ReuseEndpoint({
      agent,
      discovery,
      secret,
      worker: {
        workerId: layout.workerId,
        incarnation: layout.incarnation,
        role: layout.role,
        geometry: layout.geometry,
        tpSize: layout.tpSize,
        ppSize: layout.ppSize,
        dpRank: layout.dpRank,
      },
      rank: { tpRank, ppRank },
      banks,
      bankBytes,
      settings,
      serve: { adapter: blocks, ...(tpRank === 0 && ppRank === 0 ? { inventory } : {}) },
      ...(kind === 'vram' && admissionGate !== undefined ? { admissionGate } : {}),
      ...(host === undefined ? {} : { host }),
      ...(keyPrefix === undefined ? {} : { keyPrefix }),
    });
  }

  /** The engine is gone (or the sidecar closes): fail its pins, withdraw, deregister, unmap, close its agent. */
  async #withdraw(connection: Connection): Promise<void> {
    const adopted = connection.adopted;
    if (adopted === undefined) return;
    connection.adopted = undefined;
    adopted.blocks.gone();
    const server = adopted.endpoint.pinServer;
    const pinsRevoked = server?.heldPins ?? 0;
    await server?.engineGone();
    // The close drains first: rank part and inventory withdrawn, operations waited for, banks handed back.
    let banks = { returned: 0, retained: 0 };
    let failure: string | undefined;
    try {
      const { report } = await adopted.endpoint.close({ deadlineMs: this.#options.withdrawDeadlineMs ?? 10_000 });
      banks = { returned: report.banksReturned.length, retained: report.banksRetained.length };
    } catch (error) {
      failure = messageOf(error);
    }
    this.#ranks.delete(adopted.rankKey);
    this.#report({
      kind: 'withdrawn',
      connection: connection.id,
      workerId: adopted.workerId,
      pinsRevoked,
      banksReturned: banks.returned,
      banksRetained: banks.retained,
      unmapped: !adopted.memory.isOpen,
      ...(failure === undefined ? {} : { failure }),
    });
  }

  /** How the readers of this engine's model name its blocks (`inventory.hashSeed` salts them, '' by default). */
  #schemeOf(layout: AdoptLayout): BlockHashScheme {
    return blockHashScheme(layout.geometry, this.#options.settings.inventory?.hashSeed ?? '');
  }

  #refuse(connection: Connection, reason: AdoptionRefusal, detail: string): void {
    this.#send(connection, refusedAnswer(reason, detail));
    this.#report({ kind: 'refused', connection: connection.id, reason, detail });
  }

  #send(connection: Connection, answer: string): void {
    try {
      this.#listener.send(connection.id, answer);
    } catch {
      // The engine is gone: its `closed` event follows.
    }
  }

  #report(report: SidecarReport): void {
    this.#options.onReport?.(report);
  }
}
