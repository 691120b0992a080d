// A kvreuse sidecar serving an engine's own KV memory (docs/engines.md): engines connect to its unix
// socket and hand over a memfd with its layout; the sidecar maps it, registers and publishes it as one
// rank of the engine's worker (a serving ReuseEndpoint on an agent of its own) and serves pins and
// verified pulls for it. The engine stays the owner. When its connection ends (closed, or the engine
// died) the sidecar fails held and new pins as `engine-gone`, withdraws the rank part and inventory,
// deregisters (which fences readers still in flight), unmaps its own mapping and closes its agent.
import { randomBytes } from 'node:crypto';
import type { SettingsOf } from '@kvreuse/config';
import { layoutRankBanks } from '@kvreuse/descriptors';
import type { ClusterSecret, DiscoveryStore, discoveryGroup } from '@kvreuse/discovery';
import type { drainGroup } from '@kvreuse/drain';
import {
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
  /** The machine name published in rank parts (the kernel's boot id by default, as `ReuseEndpointOptions.host`). */
  readonly host?: string | null;
  readonly keyPrefix?: string;
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
      /** Whether the sidecar's mapping of the engine's memory is gone (false while a bank is retained). */
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

interface Connection {
  readonly id: number;
  /** Its events, handled one after another. */
  chain: Promise<void>;
  adopted:
    | (AdoptedEngine & {
        readonly memory: FileMemory;
        readonly blocksPerBank: number;
        /** How the engine's token sequences are hashed into the chain hashes readers pin by. */
        readonly scheme: BlockHashScheme;
      })
    | undefined;
}

let sequence = 0;

export class EngineSidecar {
  readonly #options: EngineSidecarOptions;
  readonly #listener: SidecarListener;
  readonly #connections = new Map<number, Connection>();
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
    await this.#adopt(connection, message.layout, [...message.stored, ...chained], fds[0] as number);
  }

  async #adopt(connection: Connection, layout: AdoptLayout, stored: readonly StoredBlock[], fd: number): Promise<void> {
    let memory: FileMemory;
    try {
      memory = FileMemory.map(fd);
    } catch (error) {
      return this.#refuse(connection, 'bad-memfd', (error as Error).message);
    }
    let specs: ReturnType<typeof layoutRankBanks>;
    try {
      specs = layoutRankBanks(
        layout.geometry,
        { tpRank: layout.tpRank, tpSize: layout.tpSize, ppRank: layout.ppRank, ppSize: layout.ppSize },
        {
          address: memory.address,
          blocks: layout.blocks,
          ...(layout.blockStride === undefined ? {} : { blockStride: layout.blockStride }),
          ...(layout.planeStride === undefined ? {} : { planeStride: layout.planeStride }),
        },
      );
    } catch (error) {
      memory.close();
      return this.#refuse(connection, 'bad-layout', (error as Error).message);
    }
    const end = specs.reduce((last, bank) => (bank.address + bank.bytes > last ? bank.address + bank.bytes : last), 0n);
    if (end - memory.address > BigInt(memory.bytes)) {
      memory.close();
      const needed = end - memory.address;
      return this.#refuse(connection, 'too-small', `the layout needs ${needed} bytes, the memfd holds ${memory.bytes}`);
    }
    await this.#serve(connection, layout, stored, memory, specs);
  }

  async #serve(
    connection: Connection,
    layout: AdoptLayout,
    stored: readonly StoredBlock[],
    memory: FileMemory,
    specs: ReturnType<typeof layoutRankBanks>,
  ): Promise<void> {
    const incarnation = layout.incarnation ?? `${layout.workerId}-${randomBytes(6).toString('hex')}`;
    const blocks = new EngineBlocks();
    blocks.store(stored);
    // Each bank handed back drops a hold on the mapping; the last one unmaps it (never while a bank is retained).
    let returned = 0;
    const release = () => {
      returned += 1;
      if (returned === specs.length && memory.isOpen) memory.close();
    };
    const { tpRank, ppRank, workerId } = layout;
    const offsetOf = (address: bigint) => Number(address - memory.address);
    // Registered with the memfd: readers on this host copy out of the engine's file at memory speed.
    const banks = specs.map((spec, index) =>
      Bank.adopt(
        { ...spec, tpRank, ppRank, index, file: { fd: memory.fd, offset: offsetOf(spec.address) } },
        frameworkOwner({ engine: connection.id, index }, release),
      ),
    );
    const bankBytes = specs.map((spec) =>
      memory.view().subarray(offsetOf(spec.address), offsetOf(spec.address + spec.bytes)),
    );
    let endpoint: ReuseEndpoint | undefined;
    try {
      endpoint = await this.#openEndpoint({ ...layout, incarnation }, banks, bankBytes, blocks);
      await endpoint.register();
      await endpoint.publish();
    } catch (error) {
      await endpoint?.close().catch(() => undefined);
      if (memory.isOpen && returned === 0) memory.close();
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
    };
    const placed = specs.map((spec) => ({ offset: offsetOf(spec.address), bytes: Number(spec.bytes) }));
    this.#send(connection, adoptedAnswer(workerId, incarnation, placed));
    const epoch = endpoint.epoch ?? 0;
    this.#report({ kind: 'adopted', connection: id, workerId, incarnation, epoch, banks: specs.length });
  }

  /** The serving endpoint of an adopted rank, on an agent of its own; rank 0 publishes the retained inventory. */
  async #openEndpoint(
    layout: AdoptLayout & { readonly incarnation: string },
    banks: Bank[],
    bankBytes: Uint8Array[],
    blocks: EngineBlocks,
  ): Promise<ReuseEndpoint> {
    const { transport, discovery, secret, settings, keyPrefix, host } = this.#options;
    const { tpRank, ppRank } = layout;
    sequence += 1;
    const agent = await transport.createAgent({
      name: `sidecar-${layout.workerId}-tp${tpRank}pp${ppRank}-${process.pid}-${sequence}`,
      backend: this.#options.backend ?? 'ucx',
    });
    const ttlMs = this.#options.inventoryTtlMs ?? 60_000;
    const inventory = { tier: 'host' as const, retained: () => blocks.retained(), ttlMs };
    try {
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
        ...(host === undefined ? {} : { host }),
        ...(keyPrefix === undefined ? {} : { keyPrefix }),
      });
    } catch (error) {
      await agent.close();
      throw error;
    }
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
      failure = error instanceof Error ? error.message : String(error);
    }
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
