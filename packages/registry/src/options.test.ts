import { describe, expect, it } from 'vitest';
import { MemoryDiscoveryStore } from '@kvreuse/discovery';
import { InvalidRegistryOptionError } from './errors.js';
import { checkArray, checkDurationMs, checkOptionsObject, checkSignal, checkStore } from './options.js';

describe('option shape checks', () => {
  it('refuse with InvalidRegistryOptionError naming the option and rendering the value as it is', () => {
    expect(() => checkOptionsObject('options', null)).toThrow(
      new InvalidRegistryOptionError('options', null, 'must be an options object'),
    );
    expect(() => checkOptionsObject('options', [])).toThrow('options = [] is refused: must be an options object');
    expect(() => checkDurationMs('timeoutMs', Number.NaN)).toThrow('timeoutMs = NaN is refused');
    expect(() => checkDurationMs('timeoutMs', Number.POSITIVE_INFINITY)).toThrow('timeoutMs = Infinity is refused');
    expect(() => checkSignal('signal', { aborted: true })).toThrow(
      'signal = {"aborted":true} is refused: must be an AbortSignal',
    );
    expect(() =>
      checkArray('banks', [1, { at: Number.NaN }], (element, option) => checkOptionsObject(option, element)),
    ).toThrow(expect.objectContaining({ code: 'INVALID_REGISTRY_OPTION', option: 'banks[0]', value: 1 }));
    expect(() => checkStore('store', { list: () => undefined })).toThrow(
      /must be a DiscoveryStore \(no grantLease\(\) method\)/,
    );
  });

  it('accept what is well shaped', async () => {
    const store = new MemoryDiscoveryStore();
    expect(() => checkStore('store', store)).not.toThrow();
    expect(() => checkSignal('signal', undefined)).not.toThrow();
    expect(() => checkSignal('signal', new AbortController().signal)).not.toThrow();
    expect(() => checkDurationMs('timeoutMs', 0.5)).not.toThrow();
    await store.close();
  });
});
