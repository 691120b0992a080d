import type { RankId, RankPart } from '@kvreuse/descriptors';
import type { Agent, Peer } from '@kvreuse/native-bindings';
import {
  ClusterSecret,
  RankPartPublicationError,
  sealMetadata,
  openSealedMetadata,
  type WorkerIncarnation,
} from '@kvreuse/discovery';
import { InvalidRegistryOptionError } from '../errors.js';
import { checkFunction, checkOptionsObject } from '../options.js';
import type { TransportMetadata } from './build-rank-part.js';

/**
 * The blob header this reader knows (native/src/metadata.c, little-endian): "KVTM" | u16 version | u16 backend | u64 incarnation | u64 generation.
 * Version 2 (the process identity names its pid namespace), version 3 (file-backed regions), version 4 (vram
 * regions checked by their readers, host-staged chunks written in place) and version 5 (the worker's network
 * address, for readers on the host in another pid namespace) kept this header.
 */
const MAGIC = 'KVTM';
const FORMAT_VERSION = 5;
const GENERATION_OFFSET = 16;

/**
 * Exports the agent's metadata blob, reads its metadata generation (bumped by every registration and
 * deregistration) and seals the blob (AES-256-GCM) under the cluster secret for the rank part of `rank`
 * (worker, incarnation and rank), for that part's `transport` field: only a member of the cluster can read
 * the agent's address and keys, and readers refuse it in any other part.
 */
export function transportMetadataOf(
  agent: Pick<Agent, 'name' | 'metadata'>,
  secret: ClusterSecret,
  rank: WorkerIncarnation & RankId,
): TransportMetadata {
  checkFunction('agent.metadata', checkOptionsObject('agent', agent).metadata);
  checkSecret(secret);
  const { workerId, incarnation, ppRank, tpRank } = checkOptionsObject('rank', rank);
  const metadata = agent.metadata();
  // The facade exposes the blob but not its generation; read it from the documented header.
  const view = new DataView(metadata.buffer, metadata.byteOffset, metadata.byteLength);
  const magic = metadata.byteLength >= GENERATION_OFFSET + 8 ? new TextDecoder().decode(metadata.subarray(0, 4)) : '';
  if (magic !== MAGIC || view.getUint16(4, true) !== FORMAT_VERSION) {
    throw new RankPartPublicationError(
      'transport.metadata',
      `${metadata.byteLength} bytes`,
      `not a version ${FORMAT_VERSION} ${MAGIC} metadata blob of agent ${agent.name}`,
    );
  }
  const generation = view.getBigUint64(GENERATION_OFFSET, true);
  if (generation > 0x7fff_ffffn) {
    throw new RankPartPublicationError(
      'transport.generation',
      generation,
      'exceeds what a rank part carries (2^31 - 1)',
    );
  }
  return {
    agentName: agent.name,
    generation: Number(generation),
    metadata: sealMetadata(secret, { workerId, incarnation, ppRank, tpRank, agentName: agent.name }, metadata),
  };
}

/** What the last load of a part gave, for a load of the same part unchanged. */
interface LoadedPart {
  /** The part's identity and sealed metadata, as loaded. */
  readonly key: string;
  readonly secret: ClusterSecret;
  readonly peer: Peer;
  /** The peer's generation after that load. */
  readonly generation: bigint;
}

/** By agent, then by the part's agent name: the last part loadRankPeer loaded for it. */
const loadedParts = new WeakMap<object, Map<string, LoadedPart>>();
/** Past this many parts remembered for one agent, those whose peers were unloaded are forgotten. */
const rememberedPartsSwept = 256;

/** The peer a load of `key` gave, when it is still loaded, ready and at the generation that load gave it. */
function loadedUnchanged(agent: object, agentName: string, key: string, secret: ClusterSecret): Peer | undefined {
  const loaded = loadedParts.get(agent)?.get(agentName);
  if (loaded === undefined || loaded.key !== key || loaded.secret !== secret || !loaded.peer.isOpen) return undefined;
  const { state, generation } = loaded.peer.info();
  return state === 'ready' && generation === loaded.generation ? loaded.peer : undefined;
}

function rememberLoaded(agent: object, agentName: string, loaded: LoadedPart): void {
  let parts = loadedParts.get(agent);
  if (parts === undefined) loadedParts.set(agent, (parts = new Map()));
  if (parts.size >= rememberedPartsSwept) for (const [name, { peer }] of parts) if (!peer.isOpen) parts.delete(name);
  parts.set(agentName, loaded);
}

/**
 * Loads (or refreshes: a newer generation replaces the older one) the agent of `part` as a peer of
 * `agent`, once its metadata opens under the cluster secret for this very part (its worker, incarnation,
 * rank and agent): metadata unsealed, signed but readable (an older envelope), cut short, sealed under
 * another secret or for another part is refused (`TransportMetadataRefusedError`) before any byte of it reaches the
 * native layer, which hands the worker address and remote keys to UCX without a length. The load runs on
 * the agent's own thread (`loadPeerInBackground`): the JavaScript thread does not wait while UCX connects.
 * Every refusal rejects the promise with nothing loaded. A part this function loaded before, unchanged (the
 * same sealed metadata under the same secret), whose peer is still loaded, ready and at the generation that
 * load gave it, resolves to that peer without opening or loading the metadata again: a pull loads its
 * sources' parts every time.
 */
export async function loadRankPeer(
  agent: Pick<Agent, 'loadPeerInBackground'>,
  part: Pick<RankPart, 'workerId' | 'incarnation' | 'transport'> & { readonly parallel: RankId },
  secret: ClusterSecret,
): Promise<Peer> {
  checkFunction('agent.loadPeerInBackground', checkOptionsObject('agent', agent).loadPeerInBackground);
  checkSecret(secret);
  const { workerId, incarnation, parallel, transport } = checkOptionsObject('part', part);
  const { ppRank, tpRank } = checkOptionsObject('part.parallel', parallel);
  const { agentName, metadata } = checkOptionsObject('part.transport', transport);
  if (typeof metadata !== 'string')
    throw new InvalidRegistryOptionError(
      'part.transport.metadata',
      metadata,
      'must be the sealed metadata in base64, as a rank part carries it',
    );
  const key = `${workerId}\n${incarnation}\n${ppRank}\n${tpRank}\n${metadata}`;
  const loaded = loadedUnchanged(agent, agentName, key, secret);
  if (loaded !== undefined) return loaded;
  const peer = await agent.loadPeerInBackground(
    openSealedMetadata(secret, { workerId, incarnation, ppRank, tpRank, agentName }, Buffer.from(metadata, 'base64')),
  );
  rememberLoaded(agent, agentName, { key, secret, peer, generation: peer.generation });
  return peer;
}

function checkSecret(secret: ClusterSecret): void {
  if (!(secret instanceof ClusterSecret))
    throw new InvalidRegistryOptionError('secret', secret, 'must be the ClusterSecret openClusterSecret returns');
}
