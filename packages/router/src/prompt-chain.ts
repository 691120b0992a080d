import type { Worker } from '@kvreuse/descriptors';
import { messageOf } from '@kvreuse/errors';
import { blockHashScheme, hashBlockChain } from '@kvreuse/inventory';
import { isObject, RouteRequestError } from './errors.js';

/** A prompt as the router takes it: its block-hash chain, or its token ids to hash. */
export type PromptInput =
  { readonly chain: BigUint64Array | readonly bigint[] } | { readonly tokens: ArrayLike<number> };

const salts = new Map<string, bigint>();

/**
 * The block salt of a model as served (`blockHashScheme` of @kvreuse/inventory: its KV content and the hash
 * seed), remembered by geometry digest and seed.
 */
export function saltOf(worker: Worker, hashSeed: string): bigint {
  const key = `${worker.geometryDigest}:${hashSeed}`;
  let salt = salts.get(key);
  if (salt === undefined) {
    salt = blockHashScheme(worker.geometry, hashSeed).salt;
    salts.set(key, salt);
  }
  return salt;
}

/**
 * The prompt's block-hash chain: the chain given, or the token ids hashed with the inventory's
 * model-salted function (`hashBlockChain`) for the destination's geometry and `inventory.hash_seed`,
 * exactly as workers hash what they retain. A partial last block is not hashed.
 */
export function promptChain(
  prompt: PromptInput,
  destination: Worker,
  hashSeed: string,
): BigUint64Array | readonly bigint[] {
  if (!isObject(prompt)) throw new RouteRequestError('prompt', prompt, 'an object with its chain or its tokens');
  const hasChain = 'chain' in prompt && prompt.chain !== undefined;
  const hasTokens = 'tokens' in prompt && prompt.tokens !== undefined;
  if (hasChain === hasTokens) {
    throw new RouteRequestError(
      'chain / tokens',
      hasChain ? 'both' : 'neither',
      'give exactly one: the block-hash chain or the token ids',
    );
  }
  if (hasChain) {
    const { chain } = prompt as { readonly chain: unknown };
    if (!(chain instanceof BigUint64Array || Array.isArray(chain))) {
      throw new RouteRequestError('chain', chain, 'a BigUint64Array or an array of bigint block hashes');
    }
    return chain;
  }
  const { tokens } = prompt as { readonly tokens: ArrayLike<number> };
  if (!isObject(destination) || !isObject(destination.geometry))
    throw new RouteRequestError('destination', destination, 'the destination worker descriptor, with its geometry');
  try {
    return hashBlockChain(tokens, {
      salt: saltOf(destination, hashSeed),
      blockTokens: destination.geometry.blockTokens,
    });
  } catch (error) {
    throw new RouteRequestError('tokens', tokens, messageOf(error), {
      cause: error,
    });
  }
}
