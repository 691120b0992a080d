import { ForeignHandleError, InvalidArgumentError } from './errors.js';
import type { AgentContext } from './handles.js';
import { check } from './library.js';
import { Region } from './memory.js';
import { assertPeer, type Peer } from './peer.js';

/**
 * One rank pair's descriptors as parallel typed arrays — the shape `materialize` of
 * `@kvreuse/descriptors` produces. Descriptor i moves `length[i]` bytes from
 * (`sourceBank[i]`, `sourceOffset[i]`) to (`destinationBank[i]`, `destinationOffset[i]`); banks index
 * the region tables of the post.
 */
export interface TransferDescriptors {
  readonly sourceBank: Uint32Array;
  readonly sourceOffset: BigUint64Array;
  readonly destinationBank: Uint32Array;
  readonly destinationOffset: BigUint64Array;
  readonly length: BigUint64Array;
}

export type TransferDirection = 'read' | 'write';

export interface PostRequest {
  /** `read`: the peer is the source and this agent the destination; `write`: the other way round. */
  readonly direction: TransferDirection;
  readonly peer: Peer;
  readonly descriptors: TransferDescriptors;
  /** This agent's regions, indexed by the local bank numbers (destinationBank for a read, sourceBank for a write). */
  readonly localRegions: readonly Region[];
  /** Region ids the peer advertised, indexed by the remote bank numbers. */
  readonly remoteRegions: readonly number[] | Uint32Array;
  /** Sent to the peer once every byte has moved; the operation completes after it was sent. */
  readonly notification?: Uint8Array | string;
}

export const directionIds: { readonly [D in TransferDirection]: number } = { read: 0, write: 1 };

/** The ids of this agent's `regions`, checked to be regions, open and its own, written into a table of `reused` (else a new one). */
export function regionTable(agent: AgentContext, regions: readonly Region[], reused?: ReusedTables): Uint32Array {
  if (!Array.isArray(regions))
    throw new InvalidArgumentError('localRegions', regions, 'must be an array of regions this agent registered');
  const ids = reused?.of(regions.length) ?? new Uint32Array(regions.length);
  for (let index = 0; index < regions.length; index++) {
    const region = regions[index];
    if (!(region instanceof Region))
      throw new InvalidArgumentError(`localRegions[${index}]`, region, 'must be a region this agent registered');
    if (!region.belongsTo(agent))
      throw new ForeignHandleError('Region', `${region.id} (localRegions[${index}])`, agent.name);
    region.assertOpen('post a transfer');
    ids[index] = region.id;
  }
  return ids;
}

/** Region ids the peer advertised, checked to be uint32s; a list is written into a table of `reused` (else a new one). */
export function remoteRegionTable(regions: readonly number[] | Uint32Array, reused?: ReusedTables): Uint32Array {
  if (regions instanceof Uint32Array) return regions;
  if (!Array.isArray(regions))
    throw new InvalidArgumentError('remoteRegions', regions, 'must be a Uint32Array or an array of region ids');
  const ids = reused?.of(regions.length) ?? new Uint32Array(regions.length);
  for (let index = 0; index < regions.length; index++) {
    const id = regions[index];
    if (!Number.isInteger(id) || (id as number) < 0 || (id as number) > 0xffff_ffff) {
      throw new InvalidArgumentError(`remoteRegions[${index}]`, id, 'must be a region id (uint32) the peer advertised');
    }
    ids[index] = id as number;
  }
  return ids;
}

/**
 * Tables a post hands to the native call and nothing keeps past it (the call reads them, and the
 * off-heap wrapper copies small ones anyway), reused by length up to 16 entries: region lists are
 * short and a post is made per operation.
 */
class ReusedTables {
  readonly #byLength: Uint32Array[] = [];

  of(length: number): Uint32Array {
    if (length > 16) return new Uint32Array(length);
    let table = this.#byLength[length];
    if (table === undefined) {
      table = new Uint32Array(length);
      this.#byLength[length] = table;
    }
    return table;
  }
}
const localTables = new ReusedTables();
const remoteTables = new ReusedTables();

/**
 * A notification as bytes (a string as UTF-8), or null for none; refuses one that is empty (the library
 * would take it for none, and the peer would wait for it in vain) or neither bytes nor a string.
 */
export function notificationBytes(notification: Uint8Array | string | undefined): Uint8Array | null {
  if (notification === undefined) return null;
  const bytes = typeof notification === 'string' ? Buffer.from(notification, 'utf8') : notification;
  if (!(bytes instanceof Uint8Array) || bytes.length === 0)
    throw new InvalidArgumentError('notification', notification, 'must be a non-empty Uint8Array or string');
  return bytes;
}

const descriptorArrays = [
  ['sourceBank', Uint32Array],
  ['sourceOffset', BigUint64Array],
  ['destinationBank', Uint32Array],
  ['destinationOffset', BigUint64Array],
  ['length', BigUint64Array],
] as const;

function checkDescriptorArrays(descriptors: TransferDescriptors): number {
  if (typeof descriptors !== 'object' || descriptors === null)
    throw new InvalidArgumentError('descriptors', descriptors, 'must be an object of five typed arrays');
  const count = descriptors.length?.length;
  for (let k = 0; k < descriptorArrays.length; k++) {
    const [field, type] = descriptorArrays[k] as (typeof descriptorArrays)[number];
    const array: unknown = descriptors[field];
    if (!(array instanceof type))
      throw new InvalidArgumentError(`descriptors.${field}`, array, `must be a ${type.name}`);
    if (array.length !== count) {
      throw new InvalidArgumentError(
        `descriptors.${field}.length`,
        array.length,
        `must equal descriptors.length.length (${count})`,
      );
    }
  }
  if (count === 0)
    throw new InvalidArgumentError('descriptors.length.length', 0, 'a batch needs at least one descriptor');
  return count;
}

/** The out-parameter of every post: read right after the call, which nothing can interleave with. */
const postedId = new BigUint64Array(1);

/**
 * Hands the batch to kvt_xfer_post as is: the typed arrays are passed by pointer, with no work per
 * descriptor in JavaScript. Every descriptor is bounds-checked natively before any byte moves.
 * Returns the native operation id.
 */
export function postTransfer(agent: AgentContext, request: PostRequest): { id: bigint; count: number } {
  const { peer, descriptors, direction } = request;
  if (!Object.hasOwn(directionIds, direction))
    throw new InvalidArgumentError('direction', direction, "must be 'read' or 'write'");
  assertPeer(peer);
  if (!peer.belongsTo(agent)) throw new ForeignHandleError('Peer', String(peer.id), agent.name);
  peer.assertOpen('post a transfer');
  const count = checkDescriptorArrays(descriptors);
  const localRegions = regionTable(agent, request.localRegions, localTables);
  const remoteRegions = remoteRegionTable(request.remoteRegions, remoteTables);
  const notification = notificationBytes(request.notification);
  const read = direction === 'read';
  check(
    agent.library,
    'kvt_xfer_post',
    agent.library.api.kvt_xfer_post(
      agent.id,
      directionIds[direction],
      peer.id,
      peer.generation,
      count,
      read ? descriptors.destinationBank : descriptors.sourceBank,
      read ? descriptors.destinationOffset : descriptors.sourceOffset,
      read ? descriptors.sourceBank : descriptors.destinationBank,
      read ? descriptors.sourceOffset : descriptors.destinationOffset,
      descriptors.length,
      localRegions.length,
      localRegions,
      remoteRegions.length,
      remoteRegions,
      notification,
      notification?.length ?? 0,
      postedId,
    ),
  );
  return { id: postedId[0] ?? 0n, count };
}
