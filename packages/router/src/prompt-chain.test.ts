import { blockHashScheme, hashBlockChain } from '@kvreuse/inventory';
import { describe, expect, it } from 'vitest';
import { llama, profile, promptTokens, workerOf } from '../test/support.js';
import { RouteRequestError } from './errors.js';
import { promptChain, saltOf } from './prompt-chain.js';

describe('promptChain', () => {
  const destination = workerOf('prefill-0', { role: 'prefill' });
  const seed = profile.blockHash.seed;

  it('hashes token ids exactly as workers do: the model-salted chain of the destination geometry and the hash seed', () => {
    const tokens = promptTokens(5);
    expect(promptChain({ tokens }, destination, seed)).toEqual(hashBlockChain(tokens, blockHashScheme(llama, seed)));
  });

  it('leaves a partial last block unhashed, and passes a given chain through', () => {
    expect(promptChain({ tokens: promptTokens(2).slice(0, 100) }, destination, seed)).toHaveLength(1);
    const chain = [1n, 2n];
    expect(promptChain({ chain }, destination, seed)).toBe(chain);
  });

  it('takes a prompt whose other field is present but undefined, as it refuses neither', () => {
    const tokens = promptTokens(3);
    const chain = [1n, 2n];
    const hashed = hashBlockChain(tokens, blockHashScheme(llama, seed));
    expect(promptChain({ chain: undefined, tokens } as never, destination, seed)).toEqual(hashed);
    expect(promptChain({ chain, tokens: undefined } as never, destination, seed)).toBe(chain);
  });

  it('salts per seed: another seed, other hashes', () => {
    expect(saltOf(destination, seed)).not.toBe(saltOf(destination, 'another'));
    expect(saltOf(destination, seed)).toBe(blockHashScheme(llama, seed).salt);
  });

  it('refuses neither or both, a chain that is no array, and bad token ids', () => {
    expect(() => promptChain({} as never, destination, seed)).toThrow(RouteRequestError);
    expect(() => promptChain({ chain: [], tokens: [] } as never, destination, seed)).toThrow(/both/);
    expect(() => promptChain({ chain: 5 } as never, destination, seed)).toThrow(/route request chain = 5/);
    expect(() => promptChain({ tokens: [-1, ...promptTokens(1).slice(1)] }, destination, seed)).toThrow(/tokens\[0\]/);
  });

  it('refuses a prompt that is no object, and blames a missing destination rather than the tokens', () => {
    expect(() => promptChain(null as never, destination, seed)).toThrow(/route request prompt = null/);
    expect(() => promptChain({ tokens: promptTokens(1) }, undefined as never, seed)).toThrow(
      /route request destination = undefined/,
    );
    expect(() => promptChain({ tokens: promptTokens(1) }, { geometry: null } as never, seed)).toThrow(
      RouteRequestError,
    );
  });
});
