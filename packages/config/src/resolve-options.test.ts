import { describe, expect, it } from 'vitest';
import { thrown } from '../test/thrown.js';
import { ResolveOptionsError } from './errors.js';
import { checkResolveOptions } from './resolve-options.js';

describe('checkResolveOptions', () => {
  it('refuses a misspelt option naming the closest, and options of the wrong type, naming the option', () => {
    const cases: [unknown, string, string][] = [
      [
        { args: ['--router-minimum-transfer-prefix-blocks=8'] },
        'args',
        'resolve: unknown option args (did you mean argv?)',
      ],
      [{ enviroment: {} }, 'enviroment', 'resolve: unknown option enviroment (did you mean env?)'],
      [
        { file: 42 },
        'file',
        'resolve: file must be a path, { path }, { text, format?, origin? } or { data, origin? }; got 42',
      ],
      [
        { file: { path: 'k.yaml', format: 'json' } },
        'file.format',
        'resolve: unknown option file.format (did you mean file.path?)',
      ],
      [
        { file: { text: 'router: {}', fromat: 'json' } },
        'file.fromat',
        'resolve: unknown option file.fromat (did you mean file.format?)',
      ],
      [
        { file: { text: 'router: {}', format: 'toml' } },
        'file.format',
        `resolve: file.format must be 'yaml' or 'json'; got "toml"`,
      ],
      [{ file: { path: 7 } }, 'file.path', 'resolve: file.path must be a string; got 7'],
      [
        { env: { KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS: 8 } },
        'env.KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS',
        'resolve: env.KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS must be a string (or undefined, for unset); got 8',
      ],
      [
        { argv: '--router-minimum-transfer-prefix-blocks=8' },
        'argv',
        'resolve: argv must be an array of strings; got "--router-minimum-transfer-prefix-blocks=8"',
      ],
      [
        'kvreuse.yaml',
        'options',
        'resolve: options must be an object { file?, env?, argv?, unknownEnv? }; got "kvreuse.yaml"',
      ],
    ];
    for (const [options, option, message] of cases) {
      const error = thrown(() => checkResolveOptions(options), ResolveOptionsError);
      expect([error.code, error.option, error.message]).toEqual(['INVALID_RESOLVE_OPTIONS', option, message]);
    }
  });

  it('takes every documented form', () => {
    expect(checkResolveOptions(undefined)).toEqual({});
    const forms = [
      {},
      { file: 'kvreuse.yaml', env: { KVREUSE_X: undefined, HOME: '/root' }, argv: [] },
      { file: { path: 'kvreuse.yaml' } },
      { file: { text: '{}', format: 'json', origin: 'configmap' } },
      { file: { data: { router: {} }, origin: 'memory' } },
      { file: undefined, env: undefined, argv: undefined },
    ];
    for (const options of forms) expect(checkResolveOptions(options)).toBe(options);
  });
});
