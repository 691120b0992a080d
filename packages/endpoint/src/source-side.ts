// A serving rank's source side: its pin server (reader peers and per-pair checksums prepared from the
// reader's published rank parts), its retained inventory, and the pins its drain waited for.
import { buildTransferTemplate, type RankId, type TransferTemplate, type Worker } from '@kvreuse/descriptors';
import type { Clock, ReaderWait } from '@kvreuse/drain';
import type { Agent, Peer } from '@kvreuse/native-bindings';
import { type ClusterSecret, type DiscoveryStore, type LeaseId } from '@kvreuse/discovery';
import { InventoryPublisher } from '@kvreuse/inventory';
import { loadRankPeer } from '@kvreuse/registry';
import { blockChecksums, type RankBankBytes } from './block-checksum.js';
import { readWorkerIncarnation } from './discovered-workers.js';
import { describeRank, UnknownReaderError } from './errors.js';
import type { PinRequestMessage } from './pin-messages.js';
import { type PinReadersOutcome, PinServer, type PinSourceIdentity, type ServedPin } from './pin-server.js';
import type { ServeOptions } from './reuse-endpoint.js';

export interface SourceSideOptions {
  readonly agent: Pick<Agent, 'sendNotification' | 'loadPeer'>;
  readonly discovery: DiscoveryStore;
  /** Readers' metadata is loaded only when signed under it. */
  readonly secret: ClusterSecret;
  readonly keyPrefix?: string;
  readonly serve: ServeOptions;
  readonly source: PinSourceIdentity;
  readonly bankBytes: RankBankBytes;
  readonly leaseMs: number;
  /** The lease this rank's part is published under: the inventory lives and dies with it. */
  readonly lease: LeaseId;
  readonly clock: Clock;
}

type Reader = PinRequestMessage['reader'];

const sameRank = (a: RankId, b: RankId): boolean => a.tpRank === b.tpRank && a.ppRank === b.ppRank;

export class SourceSide {
  readonly server: PinServer;
  readonly #options: SourceSideOptions;
  /** Reader agents by name, as loaded from their rank parts. */
  readonly #readerPeers = new Map<string, Peer>();
  /** This worker → reader incarnation templates, by `workerId/incarnation`. */
  readonly #templates = new Map<string, TransferTemplate>();
  /** This worker as published (all its ranks): the source side of every reader's template. */
  #worker: Worker | undefined;
  #inventory: InventoryPublisher | undefined;
  #stopEvictions: (() => void) | undefined;
  #reannounce: unknown;
  #withdrawing = false;
  #waited: readonly ServedPin[] = [];

  constructor(options: SourceSideOptions) {
    this.#options = options;
    this.server = new PinServer({
      agent: options.agent,
      adapter: options.serve.adapter,
      source: options.source,
      resolvePeer: (sender, reader) => this.#prepareReader(sender, reader),
      checksums: (request, blocks) => this.#checksums(request, blocks),
      leaseMs: options.leaseMs,
      clock: options.clock,
    });
  }

  /** The pins the drain waited for, and how each ended (empty before the drain). */
  get waitedPins(): readonly ServedPin[] {
    return this.#waited;
  }

  /** Publishes the retained inventory, complete, and follows the adapter's evictions (when `serve.inventory` is given). */
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
    this.#stopEvictions = this.#options.serve.adapter.onEvicted((evicted) => {
      // Advisory: a batch lost to a closing store is caught up by the next one or the key's withdrawal.
      publisher.publish([{ type: 'removed', tier: inventory.tier, blocks: evicted.map(({ hash }) => hash) }]).catch(() => undefined);
    });
  }

  /** Announces every retained block until `ttlMs` from now, and again at half that (the inventory is advisory: it expires unless renewed). */
  async #announce(publisher: InventoryPublisher, inventory: NonNullable<ServeOptions['inventory']>, options: { complete?: boolean } = {}): Promise<void> {
    const blocks = [...inventory.retained()];
    await publisher.publish(blocks.length === 0 ? [] : [{ type: 'stored', tier: inventory.tier, blocks, expiresAt: Date.now() + inventory.ttlMs }], options);
    if (this.#withdrawing) return;
    const { clock } = this.#options;
    this.#reannounce = clock.setTimer(() => void this.#announce(publisher, inventory).catch(() => undefined), Math.max(1, Math.floor(inventory.ttlMs / 2)));
  }

  /** Withdraws the inventory (the drain's step right after the rank part). */
  async withdrawInventory(): Promise<void> {
    this.#withdrawing = true;
    if (this.#reannounce !== undefined) this.#options.clock.clearTimer(this.#reannounce);
    this.#reannounce = undefined;
    this.#stopEvictions?.();
    this.#stopEvictions = undefined;
    await this.#inventory?.withdraw();
  }

  /** Refuses new pins and waits for the held ones (the drain's reader wait); keeps the pins for the report. */
  async waitForReaders(wait: ReaderWait): Promise<PinReadersOutcome> {
    const outcome = await this.server.waitForReaders(wait);
    this.#waited = outcome.pins;
    return outcome;
  }

  async #prepareReader(sender: string, reader: Reader | undefined): Promise<Peer> {
    const known = this.#readerPeers.get(sender);
    if (reader === undefined) {
      if (known === undefined) throw new UnknownReaderError(sender, 'no pin request came from it');
      return known;
    }
    const key = `${reader.workerId}/${reader.incarnation}`;
    if (known !== undefined && this.#templates.has(key)) return known;
    const { discovery, keyPrefix, source } = this.#options;
    this.#worker ??= await readWorkerIncarnation(discovery, source, keyPrefix);
    const readerWorker = await readWorkerIncarnation(discovery, reader, keyPrefix);
    const part = readerWorker?.ranks.find((rank) => rank.parallel.tpRank === reader.rank.tpRank && rank.parallel.ppRank === reader.rank.ppRank);
    if (this.#worker === undefined) throw new UnknownReaderError(sender, `this worker ${source.workerId} (${source.incarnation}) is not published complete`);
    if (readerWorker === undefined || part?.transport.agentName !== sender) {
      throw new UnknownReaderError(sender, `reader ${reader.workerId} (${reader.incarnation}) ${describeRank(reader.rank)} is not published complete with this agent`);
    }
    if (!this.#templates.has(key)) this.#templates.set(key, buildTransferTemplate(this.#worker, readerWorker));
    const peer = loadRankPeer(this.#options.agent, part, this.#options.secret);
    this.#readerPeers.set(sender, peer);
    return peer;
  }

  #checksums(request: PinRequestMessage, blocks: Uint32Array): Uint32Array {
    const template = this.#templates.get(`${request.reader.workerId}/${request.reader.incarnation}`) as TransferTemplate;
    const pair = template.pairs.findIndex((route) => sameRank(route.sourceRank, this.#options.source.rank) && sameRank(route.destinationRank, request.reader.rank));
    return blockChecksums(template, pair, 'source', this.#options.bankBytes, blocks);
  }
}
