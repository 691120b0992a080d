// A rank's WRITE hand-off: this rank's blocks written into the same blocks' places at every rank of a
// ready destination worker that it pairs with (e.g. a prefill worker handing a prompt's KV to its decode
// worker), each rank pair's template taken from the endpoint's one cache and every post on its ledger.
import type { RankId, RankPart, TransferTemplate, Worker } from '@kvreuse/descriptors';
import type { OperationLedger, PeerBook, PeerTicket } from '@kvreuse/drain';
import type { Agent, Peer, PostBlocksRequest, PostRequest, RegisteredTemplate } from '@kvreuse/native-bindings';
import type { ClusterSecret } from '@kvreuse/discovery';
import type { RegisteredRank } from '@kvreuse/registry';
import type { WorkerWatches } from './discovered-workers.js';
import { checkBlockLists } from './block-lists.js';
import { loadQueuedRankPeer } from './peer-loads.js';
import { EndpointError, EndpointOptionError } from './errors.js';
import type { PeerTemplates } from './peer-templates.js';
import { rankOf, sameRank } from './ranks.js';
import type { RemotePeers } from './remote-peers.js';

export interface PushRequest {
  /** The worker written to, as ready in discovery. */
  readonly workerId: string;
  /** This rank's blocks to write, in order. */
  readonly sourceBlocks: Uint32Array;
  /** Where each block goes in every destination rank this rank pairs with: one per source block. */
  readonly destinationBlocks: Uint32Array;
}

/** What a push moved: its blocks, the bytes every rank pair wrote, and the time from the first post to the last quiescence. */
export interface PushReceipt {
  readonly blocks: number;
  readonly bytes: number;
  readonly ms: number;
}

/** A push that did not write every block: the destination is not ready or advertises no region for a bank, or a WRITE failed (`why` says which). */
export class PushFailedError extends EndpointError {
  readonly code = 'PUSH_FAILED';
  constructor(
    readonly workerId: string,
    readonly why: string,
  ) {
    super(`push to ${workerId} failed: ${why}`);
  }
}

export interface PushSideOptions {
  readonly agent: Pick<Agent, 'loadPeerInBackground'>;
  /** Destinations' metadata is loaded only when signed under it. */
  readonly secret: ClusterSecret;
  readonly rank: RankId;
  readonly ledger: OperationLedger<PostRequest, PostBlocksRequest>;
  readonly peers: PeerBook;
  readonly workers: WorkerWatches;
  readonly templates: PeerTemplates;
  /** The destination ranks' peers, held from their load until the push returns. */
  readonly remotePeers: RemotePeers;
}

/** The one check of a push's block lists; answers the push's own copy of them (it reads them between its posts). */
function checkedPushRequest(request: PushRequest): PushRequest {
  if (typeof request !== 'object' || request === null)
    throw new EndpointOptionError('request', request, 'a push request { workerId, sourceBlocks, destinationBlocks }');
  if (typeof request.workerId !== 'string' || request.workerId === '')
    throw new EndpointOptionError('request.workerId', request.workerId, 'the destination worker id');
  if (!(request.sourceBlocks instanceof Uint32Array))
    throw new EndpointOptionError('request.sourceBlocks', request.sourceBlocks, "a Uint32Array of this rank's blocks");
  if (
    !(request.destinationBlocks instanceof Uint32Array) ||
    request.destinationBlocks.length !== request.sourceBlocks.length
  ) {
    throw new EndpointOptionError(
      'request.destinationBlocks',
      request.destinationBlocks,
      `a Uint32Array of one block per source block (${request.sourceBlocks.length})`,
    );
  }
  return {
    workerId: request.workerId,
    sourceBlocks: request.sourceBlocks.slice(),
    destinationBlocks: request.destinationBlocks.slice(),
  };
}

export class PushSide {
  readonly #options: PushSideOptions;

  constructor(options: PushSideOptions) {
    this.#options = options;
  }

  /** Writes the blocks; `own` is this rank, registered, and its worker as ready. */
  async push(
    given: PushRequest,
    own: { readonly registered: RegisteredRank; readonly worker: Worker },
  ): Promise<PushReceipt> {
    const request = checkedPushRequest(given);
    const { workerId } = request;
    const readiness = await this.#options.workers.readiness(workerId);
    if (!readiness.ready)
      throw new PushFailedError(
        workerId,
        `it is not ready: ${readiness.reasons.map((reason) => reason.message).join('; ')}`,
      );
    const template = this.#options.templates.between(own.worker, readiness.worker);
    this.#options.remotePeers.seen(readiness.worker);
    const writes: { write: RegisteredTemplate; ticket: PeerTicket }[] = [];
    const peers: Peer[] = [];
    try {
      for (const [pair, route] of template.pairs.entries())
        if (sameRank(route.sourceRank, this.#options.rank))
          writes.push(await this.#write(template, pair, readiness.worker, own.registered, peers));
      // Checked against every pair before the first block is written.
      for (const { write } of writes) checkBlockLists(write.template, request);
      return await this.#writeBlocks(request, writes, own.registered);
    } finally {
      for (const { write } of writes) this.#options.templates.release(write);
      this.#options.remotePeers.release(peers);
    }
  }

  async #writeBlocks(
    request: PushRequest,
    writes: readonly { write: RegisteredTemplate; ticket: PeerTicket }[],
    local: RegisteredRank,
  ): Promise<PushReceipt> {
    const { workerId, sourceBlocks, destinationBlocks } = request;
    const started = performance.now();
    let bytes = 0;
    // One post per block and rank pair, a block at a time: the first transfer to a freshly loaded peer
    // touches each page of its mapping for the first time (slow on virtual machines; see the native
    // README's "first touch"), and a whole prompt in one post could outlive transport.operation_timeout_ms.
    for (let block = 0; block < sourceBlocks.length; block++) {
      const posts = writes.map(({ write, ticket }) =>
        this.#options.ledger.postBlocks(
          {
            template: write,
            sourceBlocks: sourceBlocks.subarray(block, block + 1),
            destinationBlocks: destinationBlocks.subarray(block, block + 1),
          },
          { ticket, banks: local.banks },
        ),
      );
      const outcomes = await Promise.all(posts.map((operation) => operation.outcome));
      await Promise.all(posts.map((operation) => operation.quiescence));
      for (const outcome of outcomes) {
        if (!outcome.ok)
          throw new PushFailedError(workerId, `WRITE of block ${block} failed: ${outcome.error.message}`);
        bytes += outcome.bytesDone;
      }
    }
    return { blocks: sourceBlocks.length, bytes, ms: performance.now() - started };
  }

  /** The pair's write template and the destination rank's peer, loaded, tracked and held (added to `held`) for this push. */
  async #write(
    template: TransferTemplate,
    pair: number,
    destination: Worker,
    local: RegisteredRank,
    held: Peer[],
  ): Promise<{ write: RegisteredTemplate; ticket: PeerTicket }> {
    const { agent, secret, peers, templates, remotePeers } = this.#options;
    const target = (template.pairs[pair] as (typeof template.pairs)[number]).destinationRank;
    const part = destination.ranks.find((candidate) => sameRank(rankOf(candidate), target)) as RankPart;
    const peer = await loadQueuedRankPeer(agent, part, secret, remotePeers);
    held.push(peer);
    const ticket = peers.track(part.transport.agentName, destination.incarnation, peer);
    const write = templates.acquire({
      template,
      pair,
      direction: 'write',
      remote: part,
      peer,
      local,
      noRegion: (why) => new PushFailedError(destination.workerId, why),
    });
    return { write, ticket };
  }
}
