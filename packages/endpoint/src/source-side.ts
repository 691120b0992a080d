// A serving rank's source side: its pin server (reader peers and per-pair checksums prepared from the
// reader's published rank parts), its retained inventory, and the pins its drain waited for.
import type { Worker } from '@kvreuse/descriptors';
import type { Clock, ReaderWait } from '@kvreuse/drain';
import type { Agent, Peer } from '@kvreuse/native-bindings';
import { type ClusterSecret, type DiscoveryStore, type Lease, type LeaseId } from '@kvreuse/discovery';
import { InventoryPublisher, type RetentionTier } from '@kvreuse/inventory';
import type { RankBankBytes } from './block-checksum.js';
import { type ChecksumSource, sideChecksums } from './side-checksums.js';
import { readWorkerIncarnation } from './discovered-workers.js';
import { describeRank, UnknownReaderError } from './errors.js';
import type { PeerTemplates } from './peer-templates.js';
import type { PinRequestMessage } from './pin-messages.js';
import { loadQueuedRankPeer } from './peer-loads.js';
import type { PinAdapter } from './pin-adapter.js';
import type { PinChannel } from './pin-auth.js';
import type { RemoteIncarnation, RemotePeers } from './remote-peers.js';
import { type PinReadersOutcome, PinServer, type PinSourceIdentity, type ServedPin } from './pin-server.js';
import { sameRank } from './ranks.js';

/** The source side of a rank (see `ReuseEndpointOptions.serve`). */
export interface ServeOptions {
  /** The serving framework's pins on this rank's blocks (e.g. the reference `BlockPool`). */
  readonly adapter: PinAdapter;
  /** How long a granted pin lives without its reader renewing it (default: the `discovery.leaseTtlMs` setting). */
  readonly leaseMs?: number;
  /**
   * The retained inventory this rank publishes for its worker (one rank per worker publishes it, e.g.
   * tp 0 pp 0): at `publish()`, every hash `retained()` returns as `stored` on `tier` until `ttlMs` from
   * then, marked `complete`, and again every `ttlMs / 2`; every block the adapter reports evicted as
   * `removed`. Withdrawn first at drain.
   */
  readonly inventory?: {
    readonly tier: RetentionTier;
    readonly retained: () => readonly bigint[];
    readonly ttlMs: number;
    /** The inventory's discovery prefix (`InventoryPublisher`'s `prefix`): a non-empty string, where given. */
    readonly prefix?: string;
  };
}

export interface SourceSideOptions {
  readonly agent: Pick<Agent, 'loadPeerInBackground' | 'blockChecksums'>;
  /** The rank's pin messages (see `PinServerOptions.channel`). */
  readonly channel: PinChannel;
  readonly discovery: DiscoveryStore;
  /** Readers' metadata is loaded only when signed under it. */
  readonly secret: ClusterSecret;
  readonly keyPrefix?: string;
  readonly serve: ServeOptions;
  readonly source: PinSourceIdentity;
  readonly bankBytes: RankBankBytes;
  /** The rank's registered banks: those in vram are summed on the GPU by `agent` (`sideChecksums`). */
  readonly banks?: ChecksumSource['banks'];
  readonly leaseMs: number;
  /** The lease this rank's part is published under: the inventory lives and dies with it. */
  readonly lease: LeaseId;
  readonly clock: Clock;
  /** The endpoint's transfer templates: this worker → each reader's incarnation. */
  readonly templates: PeerTemplates;
  /** The readers' peers, held while a pin request is answered or a pin granted on it is held. */
  readonly remotePeers: RemotePeers;
  /** Told the number of pins served whenever it changes (`PinServerOptions.onHeldChange`). */
  readonly onHeldChange?: (held: number) => void;
}

type Reader = PinRequestMessage['reader'];

export class SourceSide {
  readonly server: PinServer;
  readonly #options: SourceSideOptions;
  /** Reader agents by name, as loaded from their rank parts, with the reader incarnation of each; forgotten once unloaded. */
  readonly #readerPeers = new Map<string, { readonly peer: Peer; readonly reader: RemoteIncarnation }>();
  /** The readers' workers as published, with the peer loaded for them, by `workerId/incarnation`; forgotten once it is unloaded. */
  readonly #readers = new Map<string, { readonly worker: Worker; readonly peer: Peer }>();
  /** This worker as published (all its ranks): the source side of every reader's template. */
  #worker: Worker | undefined;
  #inventory: InventoryPublisher | undefined;
  #stopEvictions: (() => void) | undefined;
  #reannounce: unknown;
  /** The inventory `announce` publishes, under a lease of its own: granted once, by the first announcement. */
  #announced: Promise<{ readonly publisher: InventoryPublisher; readonly lease: Lease }> | undefined;
  #withdrawing = false;
  #waited: readonly ServedPin[] = [];

  constructor(options: SourceSideOptions) {
    this.#options = options;
    this.server = new PinServer({
      channel: options.channel,
      adapter: options.serve.adapter,
      source: options.source,
      resolvePeer: (sender, reader) => this.#prepareReader(sender, reader),
      givePeerBack: (peer) => options.remotePeers.release([peer]),
      checksums: (request, blocks) => this.#checksums(request, blocks),
      leaseMs: options.leaseMs,
      clock: options.clock,
      ...(options.onHeldChange === undefined ? {} : { onHeldChange: options.onHeldChange }),
    });
  }

  /** The pins the drain waited for, and how each ended (empty before the drain). */
  get waitedPins(): readonly ServedPin[] {
    return this.#waited;
  }

  /**
   * Publishes the retained inventory, complete, and follows the adapter's evictions (when `serve.inventory` is
   * given), unless `withdrawInventory()` is called meanwhile: then it leaves nothing subscribed.
   */
  async publishInventory(): Promise<void> {
    const inventory = this.#options.serve.inventory;
    if (inventory === undefined) return;
    const { source, lease, discovery, keyPrefix } = this.#options;
    const publisher = new InventoryPublisher(discovery, {
      workerId: source.workerId,
      incarnation: source.incarnation,
      epoch: source.epoch,
      lease,
      ...(inventory.prefix === undefined ? {} : { prefix: inventory.prefix }),
      ...(keyPrefix === undefined ? {} : { keyPrefix }),
    });
    this.#inventory = publisher;
    await this.#announce(publisher, inventory, { complete: true });
    // Withdrawn while the announcement was written: nothing is followed any more.
    if (this.#withdrawing) return;
    this.#stopEvictions = this.#options.serve.adapter.onEvicted((evicted) => {
      // Advisory: a batch lost to a closing store is caught up by the next one or the key's withdrawal.
      publisher
        .publish([{ type: 'removed', tier: inventory.tier, blocks: evicted.map(({ hash }) => hash) }])
        .catch(() => undefined);
    });
  }

  /** Announces every retained block until `ttlMs` from now, and again at half that (the inventory is advisory: it expires unless renewed). */
  async #announce(
    publisher: InventoryPublisher,
    inventory: NonNullable<ServeOptions['inventory']>,
    options: { complete?: boolean } = {},
  ): Promise<void> {
    const blocks = [...inventory.retained()];
    await publisher.publish(
      blocks.length === 0
        ? []
        : [{ type: 'stored', tier: inventory.tier, blocks, expiresAt: Date.now() + inventory.ttlMs }],
      options,
    );
    if (this.#withdrawing) return;
    const { clock } = this.#options;
    this.#reannounce = clock.setTimer(
      () => void this.#announce(publisher, inventory).catch(() => undefined),
      Math.max(1, Math.floor(inventory.ttlMs / 2)),
    );
  }

  /**
   * Announces `blocks` as this worker's retained inventory on `tier`, complete, until `ttlMs` from now,
   * under a lease of its own (granted at the first announcement for the longer of `ttlMs` and the pin lease).
   * What it announces is read at the call: the caller changing `blocks` or the options meanwhile changes nothing.
   */
  async announce(
    blocks: readonly bigint[],
    announced: { readonly tier: RetentionTier; readonly ttlMs: number },
  ): Promise<void> {
    const stored = { type: 'stored' as const, tier: announced.tier, blocks: [...blocks] };
    const { ttlMs } = announced;
    const granting = (this.#announced ??= this.#announcer(ttlMs));
    // A refused grant is not kept: the next announcement asks again.
    granting.catch(() => {
      if (this.#announced === granting) this.#announced = undefined;
    });
    const { publisher } = await granting;
    await publisher.publish([{ ...stored, expiresAt: Date.now() + ttlMs }], { complete: true });
  }

  async #announcer(ttlMs: number): Promise<{ readonly publisher: InventoryPublisher; readonly lease: Lease }> {
    const { discovery, source, keyPrefix, leaseMs } = this.#options;
    const lease = await discovery.grantLease(Math.max(leaseMs, ttlMs));
    const publisher = new InventoryPublisher(discovery, {
      workerId: source.workerId,
      incarnation: source.incarnation,
      epoch: source.epoch,
      lease: lease.id,
      ...(keyPrefix === undefined ? {} : { keyPrefix }),
    });
    return { publisher, lease };
  }

  /** Withdraws the inventory, the announced one with its lease (the drain's step right after the rank part). */
  async withdrawInventory(): Promise<void> {
    this.#withdrawing = true;
    if (this.#reannounce !== undefined) this.#options.clock.clearTimer(this.#reannounce);
    this.#reannounce = undefined;
    this.#stopEvictions?.();
    this.#stopEvictions = undefined;
    await this.#inventory?.withdraw();
    const granting = this.#announced;
    this.#announced = undefined;
    // An announcement still being granted its lease is waited for: its batch is withdrawn with the rest.
    const announced = await granting?.catch(() => undefined);
    if (announced !== undefined) {
      await announced.publisher.withdraw();
      await this.#options.discovery.revokeLease(announced.lease.id);
    }
  }

  /** Refuses new pins and waits for the held ones (the drain's reader wait); keeps the pins for the report. */
  async waitForReaders(wait: ReaderWait): Promise<PinReadersOutcome> {
    const outcome = await this.server.waitForReaders(wait);
    this.#waited = outcome.pins;
    return outcome;
  }

  /** The reader's peer, held until the pin server gives it back (`givePeerBack`). */
  async #prepareReader(sender: string, reader: Reader | undefined): Promise<Peer> {
    this.#forgetUnloaded();
    const { remotePeers } = this.#options;
    const known = this.#readerPeers.get(sender);
    if (reader === undefined) {
      if (known === undefined) throw new UnknownReaderError(sender, 'no pin request came from it');
      remotePeers.hold(known.reader, known.peer);
      return known.peer;
    }
    const key = `${reader.workerId}/${reader.incarnation}`;
    if (known !== undefined && this.#readers.has(key)) {
      remotePeers.hold(reader, known.peer);
      remotePeers.seen(reader);
      return known.peer;
    }
    const { discovery, keyPrefix, source } = this.#options;
    this.#worker ??= await readWorkerIncarnation(discovery, source, keyPrefix);
    const readerWorker = await readWorkerIncarnation(discovery, reader, keyPrefix);
    const part = readerWorker?.ranks.find(
      (rank) => rank.parallel.tpRank === reader.rank.tpRank && rank.parallel.ppRank === reader.rank.ppRank,
    );
    if (this.#worker === undefined)
      throw new UnknownReaderError(
        sender,
        `this worker ${source.workerId} (${source.incarnation}) is not published complete`,
      );
    if (readerWorker === undefined || part?.transport.agentName !== sender) {
      throw new UnknownReaderError(
        sender,
        `reader ${reader.workerId} (${reader.incarnation}) ${describeRank(reader.rank)} is not published complete with this agent`,
      );
    }
    const peer = await loadQueuedRankPeer(this.#options.agent, part, this.#options.secret, remotePeers);
    this.#readers.set(key, { worker: readerWorker, peer });
    this.#readerPeers.set(sender, { peer, reader: { workerId: reader.workerId, incarnation: reader.incarnation } });
    remotePeers.seen(reader);
    return peer;
  }

  /** Forgets the readers whose peers were unloaded (a newer incarnation of their worker took over). */
  #forgetUnloaded(): void {
    for (const [key, { peer }] of this.#readers) if (!peer.isOpen) this.#readers.delete(key);
    for (const [sender, { peer }] of this.#readerPeers) if (!peer.isOpen) this.#readerPeers.delete(sender);
  }

  #checksums(request: PinRequestMessage, blocks: Uint32Array): Uint32Array {
    const { worker: reader } = this.#readers.get(`${request.reader.workerId}/${request.reader.incarnation}`) as {
      worker: Worker;
    };
    const template = this.#options.templates.between(this.#worker as Worker, reader);
    const pair = template.pairs.findIndex(
      (route) =>
        sameRank(route.sourceRank, this.#options.source.rank) && sameRank(route.destinationRank, request.reader.rank),
    );
    const { bankBytes: bytes, banks, agent } = this.#options;
    return sideChecksums(template, pair, 'source', { bytes, ...(banks === undefined ? {} : { banks }), agent }, blocks);
  }
}
