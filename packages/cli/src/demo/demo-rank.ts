// One rank of the demo's workers: a native agent, kvreuse-owned banks laid out for Qwen3-0.6B and
// registered by a ReuseEndpoint that publishes the rank part to discovery, and a BlockPool (the reference
// pin adapter) standing in for the serving framework's block table. A decode rank serves pins on what
// it retains (`serve`) and announces it as the worker's inventory; the prefill rank hands turn 1 off
// with WRITEs and fetches turn 2's prefix back (`fetch`). Given a metrics port, the rank's endpoint
// serves its metrics there until it shuts down.
import type { Settings } from '@kvreuse/config';
import { buildTransferTemplate, layoutRankBanks, type RankPart, referenceGeometries, type Worker } from '@kvreuse/descriptors';
import type { PeerTicket } from '@kvreuse/drain';
import { BlockPool, EndpointMetrics, type EndpointShutdownResult, type HeldPin, ReuseEndpoint } from '@kvreuse/endpoint';
import { type Agent, type Allocation, type Backend, loadTransport, type Peer } from '@kvreuse/native-bindings';
import { type ClusterSecret, type DiscoveryStore, type Lease, openClusterSecret, openDiscovery } from '@kvreuse/discovery';
import { blockHashFromHex, InventoryPublisher } from '@kvreuse/inventory';
import { Bank, kvreuseOwner, loadRankPeer, releaseRank } from '@kvreuse/registry';
import { DemoMessageError } from '../errors.js';
import { CrashOnPin } from './crash-on-pin.js';
import { handOff } from './hand-off.js';
import { holdsBlockContent, writeBlockContent } from './kv-content.js';
import { pullPrefix } from './pull.js';
import { reportQuarantines } from './quarantine-report.js';
import { readyWorker } from './ready-worker.js';
import { hintOf, type RankCommand, type RankMessage, type RankRole } from './rank-messages.js';

export interface DemoRankOptions {
  readonly role: RankRole;
  readonly workerId: string;
  readonly incarnation: string;
  readonly tpRank: number;
  readonly tpSize: number;
  /** The other worker of the demo (the prefill worker for a decode rank, and the reverse). */
  readonly peerWorkerId: string;
  readonly backend: Backend;
  /** Blocks per bank: the pool's slots. */
  readonly blocks: number;
  /** The resolved settings; `discovery` names the store every rank and the parent share (sqlite or etcd). */
  readonly settings: Settings;
  /** Where this rank serves its endpoint's metrics (on `endpoint.metricsHost`); absent: nowhere. */
  readonly metricsPort?: number;
  /** The native library to load (the parent's, which `transport.library` named); absent: the default one. */
  readonly libraryPath?: string;
}

/** Another worker's rank as this one addresses it. */
export interface RemoteRank {
  readonly peer: Peer;
  readonly ticket: PeerTicket;
  /** The region id of each of its banks, by bank number. */
  readonly regionIds: readonly number[];
}

/** A message without the rank's own `role` and `tpRank`, which `say` adds. */
type Said = RankMessage extends infer M ? (M extends RankMessage ? Omit<M, 'role' | 'tpRank'> : never) : never;

/** What the process hosting a rank does to it on the rank's own request. */
export interface RankHost {
  /** Ends the rank without a drain (the host's SIGKILL), for `crash-on-pin`. */
  readonly crash: () => void;
  /** Stops the rank's process until someone sends it SIGCONT, for a pull with `stopAfterPost`; absent where the rank shares its process with others. */
  readonly stop?: () => void;
}

const geometry = referenceGeometries['qwen3-0.6b'];
const hashesOf = (hex: readonly string[]): bigint[] => hex.map((text) => blockHashFromHex(text) as bigint);

export class DemoRank {
  readonly options: DemoRankOptions;
  readonly agent: Agent;
  readonly endpoint: ReuseEndpoint;
  readonly discovery: DiscoveryStore;
  /** Each bank's bytes, by bank number. */
  readonly views: readonly Uint8Array[];
  readonly pool: BlockPool;
  /** The decode rank's pin adapter over the pool. */
  readonly adapter: CrashOnPin;
  readonly #say: (message: Said) => void;
  readonly #settings: Settings;
  readonly #secret: ClusterSecret;
  readonly #host: RankHost;
  #ownWorker: Worker | undefined;
  #peerWorker: Worker | undefined;
  #inventory: { publisher: InventoryPublisher; lease: Lease } | undefined;
  /** Lets go of the pins a `holdPins` pull holds. */
  #releasePins: (() => void) | undefined;
  readonly #peers = new Map<string, RemoteRank>();

  private constructor(options: DemoRankOptions, agent: Agent, discovery: DiscoveryStore, secret: ClusterSecret, allocations: Allocation[], banks: Bank[], say: (message: Said) => void, host: RankHost) {
    this.options = options;
    this.#host = host;
    this.agent = agent;
    this.discovery = discovery;
    this.#say = say;
    this.#settings = options.settings;
    this.#secret = secret;
    this.views = allocations.map((allocation) => allocation.view());
    this.pool = new BlockPool(options.blocks);
    this.adapter = new CrashOnPin(this.pool, host.crash);
    const { role, workerId, incarnation, tpRank, tpSize } = options;
    const { metricsPort } = options;
    this.endpoint = new ReuseEndpoint({
      agent,
      discovery,
      secret,
      worker: { workerId, incarnation, role, geometry, tpSize, ppSize: 1, dpRank: 0 },
      rank: { tpRank, ppRank: 0 },
      banks,
      // Each rank serves its metrics on a port of its own (none without one).
      settings: { ...this.#settings, endpoint: { ...this.#settings.endpoint, metricsPort: metricsPort ?? 0 } },
      bankBytes: this.views,
      ...(role === 'decode' ? { serve: { adapter: this.adapter } } : {}),
      withdrawInventory: () => this.#withdrawInventory(),
      ...(metricsPort === undefined ? {} : { metrics: new EndpointMetrics({ labels: { worker: workerId, rank: `tp${tpRank}` } }) }),
    });
    reportQuarantines(this.endpoint.ledger, say);
    this.endpoint.onTransition(({ to }) => {
      if (to === 'ready') say({ type: 'ready' });
    });
  }

  /**
   * Opens discovery, starts the agent, allocates and adopts the rank's banks; `publish()` comes next.
   * `host` crashes or stops the rank's process when a command asks for it.
   */
  static async open(options: DemoRankOptions, say: (message: Said) => void, host: RankHost): Promise<DemoRank> {
    const secret = openClusterSecret(options.settings.discovery);
    const discovery = openDiscovery(options.settings.discovery);
    const transport = loadTransport(options.libraryPath === undefined ? {} : { libraryPath: options.libraryPath });
    const agent = await transport.createAgent({ name: `${options.workerId}-tp${options.tpRank}-${options.incarnation}`, backend: options.backend });
    const layout = layoutRankBanks(geometry, { tpRank: options.tpRank, tpSize: options.tpSize, ppRank: 0, ppSize: 1 }, { address: 0n, blocks: options.blocks });
    const allocations = await Promise.all(layout.map((bank) => agent.allocate(bank.bytes)));
    // A serving framework's KV cache is resident: touch every page now, not in the first transfer's time.
    for (const allocation of allocations) allocation.view().fill(0);
    const banks = layout.map((bank, index) => {
      const allocation = allocations[index] as Allocation;
      return Bank.adopt({ ...bank, tpRank: options.tpRank, ppRank: 0, index, address: allocation.address }, kvreuseOwner(allocation));
    });
    return new DemoRank(options, agent, discovery, secret, allocations, banks, say, host);
  }

  /**
   * Registers the banks (the endpoint starts serving its metrics first, given a port) and publishes the
   * rank part; once the worker is ready, says `published` with its epoch and the metrics URL.
   */
  async publish(): Promise<void> {
    await this.endpoint.register({ timeoutMs: 30_000 });
    await this.endpoint.publish();
    const { epoch } = await this.endpoint.whenReady();
    const metricsUrl = this.endpoint.metricsListener?.url;
    this.#say({ type: 'published', agentName: this.agent.name, epoch, ...(metricsUrl === undefined ? {} : { metricsUrl }) });
  }

  /** This rank's part of its worker. */
  get part(): RankPart {
    return (this.#ownWorker as Worker).ranks[this.options.tpRank] as RankPart;
  }

  /**
   * The peer of another worker's rank, loaded once from its published metadata and tracked by the
   * endpoint (its drain invalidates it), with the region id it advertises for each of its banks.
   */
  peerOf(worker: Worker, part: RankPart): RemoteRank {
    const name = part.transport.agentName;
    let known = this.#peers.get(name);
    if (known === undefined) {
      const peer = loadRankPeer(this.agent, part, this.#secret);
      const advertised = peer.regions();
      const regionIds = part.banks.map((bank, index) => {
        const region = advertised.find((candidate) => candidate.address === BigInt(bank.address));
        if (region === undefined) throw new DemoMessageError(`rank part of ${name}`, `lists bank ${index}, for which the agent advertises no region`);
        return region.id;
      });
      known = { peer, ticket: this.endpoint.peers.track(name, worker.incarnation, peer), regionIds };
      this.#peers.set(name, known);
    }
    return known;
  }

  async handle(command: RankCommand): Promise<void> {
    this.#ownWorker ??= await readyWorker(this.discovery, this.options.workerId);
    this.#peerWorker ??= await readyWorker(this.discovery, this.options.peerWorkerId);
    const expected = command.type === 'hand-off' || command.type === 'pull' || command.type === 'release-pins' ? 'prefill' : 'decode';
    if (this.options.role !== expected) throw new DemoMessageError(`command "${command.type}"`, `is for a ${expected} rank, not a ${this.options.role} rank`);
    switch (command.type) {
      case 'allocate':
        this.#say({ type: 'allocated', slots: Array.from({ length: command.count }, () => this.pool.allocate()) });
        return;
      case 'retain':
        await this.#retain(command);
        return;
      case 'crash-on-pin':
        this.adapter.arm();
        this.#say({ type: 'armed' });
        return;
      case 'hand-off': {
        const hashes = hashesOf(command.hashes);
        const template = buildTransferTemplate(this.#ownWorker, this.#peerWorker);
        const handed = await handOff({ rank: this, template, decode: this.#peerWorker, hashes, destinationSlots: command.destinationSlots });
        this.#say({ type: 'handed-off', ...handed });
        return;
      }
      case 'pull': {
        const disarm = command.stopAfterPost === true ? this.#stopAfterPost() : undefined;
        try {
          const pull = await pullPrefix({
            rank: this,
            hint: hintOf(command.hint),
            ...(command.prediction === undefined ? {} : { prediction: command.prediction }),
            ...(command.holdPins === true ? { beforeRelease: (pins: readonly HeldPin[]) => this.#holdPins(pins) } : {}),
          });
          this.#say({ type: 'pulled', pull });
        } finally {
          disarm?.();
        }
        return;
      }
      case 'release-pins': {
        const release = this.#releasePins;
        if (release === undefined) throw new DemoMessageError('command "release-pins"', 'no pull of this rank holds pins');
        this.#releasePins = undefined;
        release();
        return;
      }
    }
  }

  /**
   * Prefill: once the pull posts its reads (one per rank pair, all in one synchronous step), says
   * `stopping-after-post` and stops the process, every read still in flight. Returns the disarm, for a
   * pull that ends without posting.
   */
  #stopAfterPost(): () => void {
    const stop = this.#host.stop;
    if (stop === undefined) throw new DemoMessageError('command "pull"', 'stopAfterPost needs a rank in a process of its own, which it stops');
    let operations = 0;
    const disarm = this.endpoint.ledger.on('posted', () => {
      operations += 1;
      if (operations > 1) return;
      queueMicrotask(() => {
        disarm();
        this.#say({ type: 'stopping-after-post', operations });
        stop();
      });
    });
    return disarm;
  }

  /** Prefill: says which sources' pins it holds, and holds them until `release-pins`. */
  #holdPins(pins: readonly HeldPin[]): Promise<void> {
    this.#say({ type: 'holding', sources: pins.map((pin) => `${pin.source.workerId}/tp${pin.source.rank.tpRank}`) });
    return new Promise((resolve) => (this.#releasePins = resolve));
  }

  /** Decode: checks each handed-off block byte for byte, retains it, decodes the appended blocks, announces them all. */
  async #retain(command: Extract<RankCommand, { type: 'retain' }>): Promise<void> {
    const hashes = hashesOf(command.hashes);
    let verified = 0;
    for (const [index, slot] of command.slots.entries()) {
      const hash = hashes[index] as bigint;
      if (holdsBlockContent(this.part, this.views, slot, hash)) verified++;
      this.pool.commit(slot, hash);
    }
    const appended = hashesOf(command.append);
    for (const hash of appended) {
      const slot = this.pool.allocate();
      writeBlockContent(this.part, this.views, slot, hash);
      this.pool.commit(slot, hash);
    }
    if (command.publishInventory) await this.#announce([...hashes, ...appended]);
    this.#say({ type: 'retained', blocks: hashes.length + appended.length, verified, appended: appended.length });
  }

  /** Publishes the retained blocks as the decode worker's host-tier inventory, under a lease of their own. */
  async #announce(blocks: bigint[]): Promise<void> {
    const ttlMs = this.#settings.discovery.leaseTtlMs;
    if (this.#inventory === undefined) {
      const lease = await this.discovery.grantLease(Math.max(ttlMs, 600_000));
      const publisher = new InventoryPublisher(this.discovery, { workerId: this.options.workerId, incarnation: this.options.incarnation, epoch: this.endpoint.readyRank.epoch, lease: lease.id });
      this.#inventory = { publisher, lease };
    }
    await this.#inventory.publisher.publish([{ type: 'stored', tier: 'host', blocks, expiresAt: Date.now() + 600_000 }], { complete: true });
  }

  /**
   * The drain's step after the rank part's withdrawal. A serving rank's drain goes straight on to refuse
   * new pins and wait for the held ones, so it says `waiting-for-readers` last: a pin released after that is waited for.
   */
  async #withdrawInventory(): Promise<void> {
    if (this.#inventory !== undefined) {
      await this.#inventory.publisher.withdraw();
      await this.discovery.revokeLease(this.#inventory.lease.id);
    }
    if (this.options.role === 'decode') this.#say({ type: 'waiting-for-readers' });
  }

  /**
   * In-process stand-in for SIGKILL (the loopback host's): no drain, no pin released, no publication
   * withdrawn; the regions go away under any reader and the agent closes.
   */
  async crash(): Promise<void> {
    const registered = this.endpoint.registered;
    if (registered !== undefined) await releaseRank(registered);
    await this.agent.close();
    await this.discovery.close();
    await this.endpoint.metricsListener?.close();
  }

  /** SIGTERM: the endpoint's shutdown, source side first (pins waited for; its metrics listener closed last), then discovery closed. */
  async close(): Promise<EndpointShutdownResult> {
    const result = await this.endpoint.close();
    await this.discovery.close();
    return result;
  }
}
