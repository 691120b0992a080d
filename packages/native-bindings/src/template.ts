import { prepareTransfer, type TransferTemplate, transferTemplateFormat } from '@kvreuse/descriptors';
import { ForeignHandleError, InvalidArgumentError } from './errors.js';
import { type AgentContext, HandleState } from './handles.js';
import { check } from './library.js';
import type { Region } from './memory.js';
import { assertPeer, type Peer } from './peer.js';
import { directionIds, notificationBytes, regionTable, remoteRegionTable, type TransferDirection } from './transfer.js';

export interface RegisterTemplateRequest {
  /** The agent of the other rank of the pair, loaded at the generation the template is bound to. */
  readonly peer: Peer;
  /** Built by `buildTransferTemplate` of `@kvreuse/descriptors`. */
  readonly template: TransferTemplate;
  /** The rank pair (index into `template.pairs`) this agent and the peer carry; may be left out when there is one. */
  readonly pair?: number;
  /** `read`: this agent holds the pair's destination rank and pulls; `write`: it holds the source rank and pushes. */
  readonly direction: TransferDirection;
  /** This agent's regions, indexed by its rank's bank numbers (the template's destination banks for a read). */
  readonly localRegions: readonly Region[];
  /** Region ids the peer advertised, indexed by its rank's bank numbers. */
  readonly remoteRegions: readonly number[] | Uint32Array;
}

export interface PostBlocksRequest {
  readonly template: RegisteredTemplate;
  /** Block `sourceBlocks[i]` of the source rank goes to block `destinationBlocks[i]` of the destination rank. */
  readonly sourceBlocks: Uint32Array;
  readonly destinationBlocks: Uint32Array;
  /** Sent to the peer once every byte has moved; the operation completes after it was sent. */
  readonly notification?: Uint8Array | string;
}

function pairIndex(template: TransferTemplate, pair: number | undefined): number {
  if (pair === undefined) {
    if (template.pairs.length === 1) return 0;
    throw new InvalidArgumentError('pair', pair, `must name one of the template's ${template.pairs.length} rank pairs`);
  }
  if (!Number.isInteger(pair) || pair < 0 || pair >= template.pairs.length) {
    throw new InvalidArgumentError('pair', pair, `must be an integer in 0 … ${template.pairs.length - 1}`);
  }
  return pair;
}

/**
 * One rank pair of a transfer template registered with an agent against a peer generation: its routes
 * were bounds-checked once, natively, at the largest blocks of each side. Post on it with
 * `agent.postBlocks`. It dies with the peer generation: after the peer is reloaded or invalidated, posts
 * fail with NOT_FOUND (register the template again). Release it with `release()`.
 */
export class RegisteredTemplate {
  readonly template: TransferTemplate;
  readonly pair: number;
  readonly direction: TransferDirection;
  readonly peer: Peer;
  /** The peer generation it is bound to. */
  readonly generation: bigint;
  readonly #agent: AgentContext;
  readonly #id: number;
  readonly #state: HandleState;
  readonly #onRelease: (template: RegisteredTemplate) => void;

  private constructor(
    agent: AgentContext,
    id: number,
    request: RegisterTemplateRequest,
    pair: number,
    onRelease: (template: RegisteredTemplate) => void,
  ) {
    this.#agent = agent;
    this.#onRelease = onRelease;
    this.#id = id;
    this.template = request.template;
    this.pair = pair;
    this.direction = request.direction;
    this.peer = request.peer;
    this.generation = request.peer.generation;
    this.#state = new HandleState(this, 'RegisteredTemplate', `${id} of agent ${agent.name}`);
  }

  /** @internal Use agent.registerTemplate. */
  static register(
    agent: AgentContext,
    request: RegisterTemplateRequest,
    onRelease: (template: RegisteredTemplate) => void,
  ): RegisteredTemplate {
    const { peer, template, direction } = request;
    if (!Object.hasOwn(directionIds, direction))
      throw new InvalidArgumentError('direction', direction, "must be 'read' or 'write'");
    if (typeof template !== 'object' || template === null || template.format !== transferTemplateFormat) {
      throw new InvalidArgumentError(
        'template',
        template,
        `must come from buildTransferTemplate (format ${transferTemplateFormat})`,
      );
    }
    assertPeer(peer);
    if (!peer.belongsTo(agent)) throw new ForeignHandleError('Peer', String(peer.id), agent.name);
    peer.assertOpen('register a transfer template');
    const pair = pairIndex(template, request.pair);
    const localRegions = regionTable(agent, request.localRegions);
    const remoteRegions = remoteRegionTable(request.remoteRegions);
    const first = template.pairRouteStart[pair] as number;
    const end = template.pairRouteStart[pair + 1] as number;
    const routes = <T extends Uint32Array | BigUint64Array>(array: T): T => array.subarray(first, end) as T;
    const read = direction === 'read';
    const local = read ? 'destination' : 'source';
    const remote = read ? 'source' : 'destination';
    const out = new Uint32Array(1);
    check(
      agent.library,
      'kvt_template_register',
      agent.library.api.kvt_template_register(
        agent.id,
        peer.id,
        peer.generation,
        {
          route_count: end - first,
          local_index: routes(template[`${local}Bank`]),
          remote_index: routes(template[`${remote}Bank`]),
          local_base: routes(template[`${local}Base`]),
          remote_base: routes(template[`${remote}Base`]),
          local_block_stride: routes(template[`${local}BlockStride`]),
          remote_block_stride: routes(template[`${remote}BlockStride`]),
          rows: routes(template.rows),
          row_bytes: routes(template.rowBytes),
          local_row_stride: routes(template[`${local}RowStride`]),
          remote_row_stride: routes(template[`${remote}RowStride`]),
          local_region_count: localRegions.length,
          local_regions: localRegions,
          remote_region_count: remoteRegions.length,
          remote_regions: remoteRegions,
          local_block_limit: template[`${local}Limit`].blocks,
          remote_block_limit: template[`${remote}Limit`].blocks,
        },
        out,
      ),
    );
    return new RegisteredTemplate(agent, out[0] ?? 0, request, pair, onRelease);
  }

  get isOpen(): boolean {
    return this.#state.isOpen;
  }

  /** @internal Whether it was registered with `agent`. */
  belongsTo(agent: AgentContext): boolean {
    return agent === this.#agent;
  }

  /**
   * Checks the block lists with `prepareTransfer` (equally long Uint32Arrays, blocks within the limits,
   * no destination block twice: its typed errors) and hands them to kvt_xfer_post_blocks as they are;
   * the progress thread expands the routes while it issues them. Returns the native operation id.
   * @internal Use agent.postBlocks.
   */
  post(request: PostBlocksRequest): bigint {
    this.#state.assertOpen('post on a transfer template');
    this.#agent.assertOpen('post on a transfer template');
    const { sourceBlocks, destinationBlocks } = prepareTransfer({
      template: this.template,
      sourceBlocks: request.sourceBlocks,
      destinationBlocks: request.destinationBlocks,
    });
    if (sourceBlocks.length === 0)
      throw new InvalidArgumentError('sourceBlocks.length', 0, 'a post needs at least one block pair');
    const read = this.direction === 'read';
    const notification = notificationBytes(request.notification);
    const out = new BigUint64Array(1);
    const { library, id } = this.#agent;
    check(
      library,
      'kvt_xfer_post_blocks',
      library.api.kvt_xfer_post_blocks(
        id,
        this.#id,
        directionIds[this.direction],
        sourceBlocks.length,
        read ? destinationBlocks : sourceBlocks,
        read ? sourceBlocks : destinationBlocks,
        notification,
        notification?.length ?? 0,
        out,
      ),
    );
    return out[0] ?? 0n;
  }

  /** Releases the native template; operations already posted on it run to their end. Releasing twice does nothing. */
  release(): void {
    if (!this.#state.isOpen) return;
    this.#agent.assertOpen('release a transfer template');
    check(
      this.#agent.library,
      'kvt_template_release',
      this.#agent.library.api.kvt_template_release(this.#agent.id, this.#id),
    );
    this.#state.markClosed();
    this.#onRelease(this);
  }

  /** @internal The agent was destroyed, and its templates with it. */
  closedWithAgent(): void {
    this.#state.markClosed();
  }
}
