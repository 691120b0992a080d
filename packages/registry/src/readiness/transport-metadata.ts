import type { Agent } from '@kvreuse/native-bindings';
import { RankPartPublicationError } from '../errors.js';
import { checkFunction, checkOptionsObject } from '../options.js';
import type { TransportMetadata } from './publish.js';

/**
 * The blob header this reader knows (native/src/metadata.c, little-endian): "KVTM" | u16 version | u16 backend | u64 incarnation | u64 generation.
 * Version 2 (the process identity names its pid namespace) kept this header.
 */
const MAGIC = 'KVTM';
const FORMAT_VERSION = 2;
const GENERATION_OFFSET = 16;

/**
 * Exports the agent's metadata blob and reads its metadata generation (bumped by every
 * registration and deregistration), for the rank part's `transport` field.
 */
export function transportMetadataOf(agent: Pick<Agent, 'name' | 'metadata'>): TransportMetadata {
  checkFunction('agent.metadata', checkOptionsObject('agent', agent).metadata);
  const metadata = agent.metadata();
  // The facade exposes the blob but not its generation; read it from the documented header.
  const view = new DataView(metadata.buffer, metadata.byteOffset, metadata.byteLength);
  const magic = metadata.byteLength >= GENERATION_OFFSET + 8 ? new TextDecoder().decode(metadata.subarray(0, 4)) : '';
  if (magic !== MAGIC || view.getUint16(4, true) !== FORMAT_VERSION) {
    throw new RankPartPublicationError('transport.metadata', `${metadata.byteLength} bytes`, `not a version ${FORMAT_VERSION} ${MAGIC} metadata blob of agent ${agent.name}`);
  }
  const generation = view.getBigUint64(GENERATION_OFFSET, true);
  if (generation > 0x7fff_ffffn) {
    throw new RankPartPublicationError('transport.generation', generation, 'exceeds what a rank part carries (2^31 - 1)');
  }
  return { agentName: agent.name, generation: Number(generation), metadata };
}
