// A rank part as a worker publishes it: built from its registered banks and its transport metadata.
import { type Geometry, parseRankPart, type RankPart, type Role } from '@kvreuse/descriptors';
import { RankPartPublicationError } from '@kvreuse/discovery';
import { checkArray, checkOptionsObject } from '../options.js';
import type { RegisteredRank } from '../registration/register-rank.js';

/** The worker a rank belongs to, as its rank part states it. */
export interface WorkerIdentity {
  readonly workerId: string;
  /** Random per process start; a new incarnation replaces every part of the previous one. */
  readonly incarnation: string;
  readonly role: Role;
  readonly geometry: Geometry;
  readonly tpSize: number;
  readonly ppSize: number;
  readonly dpRank: number;
}

/** The native agent's view that peers need: its name, metadata generation and metadata blob (signed: `transportMetadataOf`). */
export interface TransportMetadata {
  readonly agentName: string;
  readonly generation: number;
  readonly metadata: Uint8Array;
}

/**
 * Builds the rank part of a registered rank and validates it with the descriptors schema (shard
 * split, bank count and layout). Refuses a rank whose banks are not all registered. A rank whose
 * banks carry a `planeStride` is published as rank part version 2, any other as version 1, which
 * older readers still read; a rank that names its `host` (what routers compare to tell a same-host
 * source from one across the network) is published as version 3.
 */
export function buildRankPart(
  worker: WorkerIdentity,
  rank: RegisteredRank,
  transport: TransportMetadata,
  options: { readonly host?: string } = {},
): RankPart {
  checkOptionsObject('options', options);
  if (
    options.host !== undefined &&
    (typeof options.host !== 'string' || options.host === '' || options.host.length > 255)
  ) {
    throw new RankPartPublicationError(
      'options.host',
      options.host,
      'must be a string of 1 to 255 characters naming the machine',
    );
  }
  checkOptionsObject('worker', worker);
  checkArray('rank.banks', checkOptionsObject('rank', rank).banks, (bank, option) => checkOptionsObject(option, bank));
  checkOptionsObject('transport', transport);
  if (!(transport.metadata instanceof Uint8Array))
    throw new RankPartPublicationError(
      'transport.metadata',
      transport.metadata,
      "must be the agent's metadata blob (bytes)",
    );
  rank.banks.forEach((bank, index) => {
    if (bank.state !== 'registered') {
      throw new RankPartPublicationError(
        `banks[${index}].state`,
        bank.state,
        'only a rank whose every bank is registered can be published',
      );
    }
  });
  const planeStrided = rank.banks.some((bank) => bank.planeStride !== undefined);
  return parseRankPart({
    version: options.host !== undefined ? 3 : planeStrided ? 2 : 1,
    workerId: worker.workerId,
    incarnation: worker.incarnation,
    role: worker.role,
    geometry: worker.geometry,
    parallel: {
      tpRank: rank.tpRank,
      tpSize: worker.tpSize,
      ppRank: rank.ppRank,
      ppSize: worker.ppSize,
      dpRank: worker.dpRank,
    },
    banks: rank.banks.map((bank) => ({
      memKind: bank.memKind,
      deviceId: bank.deviceId,
      address: bank.address.toString(),
      bytes: bank.bytes.toString(),
      blocks: bank.blocks,
      blockStride: bank.blockStride.toString(),
      ...(bank.planeStride === undefined ? {} : { planeStride: bank.planeStride.toString() }),
    })),
    transport: {
      agentName: transport.agentName,
      generation: transport.generation,
      metadata: Buffer.from(
        transport.metadata.buffer,
        transport.metadata.byteOffset,
        transport.metadata.byteLength,
      ).toString('base64'),
    },
    ...(options.host === undefined ? {} : { host: options.host }),
  });
}
