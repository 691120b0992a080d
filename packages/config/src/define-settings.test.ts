import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { thrown } from '../test/thrown.js';
import { defineSettings } from './define-settings.js';
import {
  InvalidCompositionError,
  InvalidGroupError,
  InvalidSettingError,
  ResolveOptionsError,
  UnknownSettingError,
} from './errors.js';
import { defineGroup } from './group.js';
import { allSampleGroups, frontendGroup, routerGroup, transportGroup } from '../test/sample-groups.js';

/** What a newer process writes into the shared file, environment and argv: a group this one has never heard of. */
const SHARED_FILE = `router:
  minimum_transfer_prefix_blocks: 8
transport:
  backend: loopback
  heartbeat_interval_ms: 250
`;

describe('defineSettings: one composition', () => {
  const frontend = defineSettings([frontendGroup]);

  it('resolves the composed groups only, with their defaults, provenance and nothing ignored', () => {
    const { settings, provenance, ignored } = frontend.resolve({ argv: ['--frontend-reject-media-status-code=422'] });
    expect(settings).toEqual({ frontend: { rejectMediaStatusCode: 422 } });
    expect(provenance).toEqual({
      frontend: { rejectMediaStatusCode: { source: 'argv', flag: '--frontend-reject-media-status-code' } },
    });
    expect(ignored).toEqual([]);
    expect(frontend.defaults).toEqual({ frontend: { rejectMediaStatusCode: 415 } });
  });

  it('describes, documents and helps with the composed settings only', () => {
    expect(frontend.describe().map((group) => group.name)).toEqual(['frontend']);
    expect(frontend.describeSetting('frontend.rejectMediaStatusCode')).toMatchObject({
      env: 'KVREUSE_FRONTEND_REJECT_MEDIA_STATUS_CODE',
    });
    expect(Object.keys(frontend.jsonSchema['properties'] as object)).toEqual(['frontend']);
    expect(frontend.renderHelp()).toContain('--frontend-reject-media-status-code <value>');
    expect(frontend.renderHelp()).not.toContain('--router-');
    const docs = frontend.renderDocs({ preface: 'For the front end.' });
    expect(docs).toContain('### `frontend.reject_media_status_code`');
    expect(docs).toContain('For the front end.');
    expect(docs).not.toContain('router.minimum_transfer_prefix_blocks`');
    expect(docs).toContain('## Rules between settings\n\nNone.');
  });

  it('shares its descriptions and JSON Schema frozen: a caller that edits them cannot change how values are read', () => {
    const router = defineSettings([routerGroup]);
    const reuse = router.describeSetting('router.enableDecodeToPrefillReuse');
    expect(() => {
      (reuse.jsonSchema as Record<string, unknown>)['type'] = 'string';
    }).toThrow(TypeError);
    const groups = router.jsonSchema['properties'] as Record<string, { properties: Record<string, object> }>;
    expect(() => {
      delete (groups['router']!.properties as Record<string, unknown>)['enable_decode_to_prefill_reuse'];
    }).toThrow(TypeError);
    const env = { KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_REUSE: '1' };
    expect(router.resolve({ env }).settings.router.enableDecodeToPrefillReuse).toBe(true);
  });

  it('refuses renderDocs options it does not take, and a preface that is no string, naming them', () => {
    const refused = (options: unknown, message: string) =>
      expect(() => frontend.renderDocs(options as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message }),
      );
    refused(null, 'renderDocs: options must be undefined or { preface? }; got null');
    refused({ prefix: 'x' }, 'renderDocs: options.prefix must be left out: the options are { preface? }; got "x"');
    refused({ preface: 5 }, 'renderDocs: options.preface must be Markdown, a string; got 5');
  });

  it('refuses describeSetting of a path it does not compose with a typed UNKNOWN_SETTING naming the closest path', () => {
    const error = thrown(() => frontend.describeSetting('router.nope' as never), UnknownSettingError);
    expect(error.code).toBe('UNKNOWN_SETTING');
    expect(error.unknown).toEqual([
      { name: 'router.nope', source: { source: 'code' }, closest: 'frontend.rejectMediaStatusCode' },
    ]);
    const every = defineSettings(allSampleGroups);
    expect(
      thrown(() => every.describeSetting('router.minimumTransferPrefixBlock' as never), UnknownSettingError).unknown[0]
        ?.closest,
    ).toBe('router.minimumTransferPrefixBlocks');
  });

  it('refuses what is not a composition of distinct groups, and options it does not take', () => {
    expect(thrown(() => defineSettings([]), InvalidCompositionError).code).toBe('INVALID_COMPOSITION');
    expect(thrown(() => defineSettings([routerGroup, routerGroup]), InvalidCompositionError).problems).toEqual([
      'group router is composed twice',
    ]);
    expect(
      thrown(() => defineSettings([{ name: 'router', settings: {} }] as never), InvalidCompositionError).problems,
    ).toEqual(['groups[0] is not a group made by defineGroup']);
    expect(
      thrown(() => defineSettings([routerGroup], { foreignGroup: 'ignore' } as never), InvalidCompositionError)
        .problems,
    ).toEqual(['unknown option foreignGroup (did you mean foreignGroups?)']);
    expect(
      thrown(() => defineSettings([routerGroup], { foreignGroups: 'warn' } as never), InvalidCompositionError).problems,
    ).toEqual([`foreignGroups must be 'error' or 'ignore', not "warn"`]);
  });
});

describe('defineSettings: settings of groups not composed', () => {
  const env = { KVREUSE_TRANSPORT_HEARTBEAT_INTERVAL_MS: '250', KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS: '6' };
  const argv = [
    '--transport-heartbeat-misses',
    '3',
    '--no-transport-heartbeat',
    '--router-minimum-estimated-ttft-saving-ms=7',
  ];
  const options = { file: { text: SHARED_FILE, origin: 'shared.yaml' }, env, argv };

  it('refuses them by default, naming each as written with its group', () => {
    const error = thrown(() => defineSettings([routerGroup]).resolve(options), UnknownSettingError);
    expect(error.unknown).toEqual([
      { name: 'transport', source: { source: 'file', path: 'shared.yaml', line: 3 }, foreignGroup: 'transport' },
      {
        name: 'KVREUSE_TRANSPORT_HEARTBEAT_INTERVAL_MS',
        source: { source: 'env', variable: 'KVREUSE_TRANSPORT_HEARTBEAT_INTERVAL_MS' },
        foreignGroup: 'transport',
      },
      {
        name: '--transport-heartbeat-misses',
        source: { source: 'argv', flag: '--transport-heartbeat-misses' },
        foreignGroup: 'transport',
      },
      {
        name: '--no-transport-heartbeat',
        source: { source: 'argv', flag: '--no-transport-heartbeat' },
        foreignGroup: 'transport',
      },
    ]);
    expect(error.message).toContain(
      'transport in file shared.yaml:3 (group transport is not composed by this process)',
    );
  });

  it("ignores them under foreignGroups: 'ignore', listing each with its name as written, source and group", () => {
    const { settings, ignored } = defineSettings([routerGroup], { foreignGroups: 'ignore' }).resolve(options);
    expect(settings.router).toMatchObject({ minimumTransferPrefixBlocks: 6, minimumEstimatedTtftSavingMs: 7 });
    expect(ignored).toEqual([
      { name: 'transport.backend', source: { source: 'file', path: 'shared.yaml', line: 4 }, group: 'transport' },
      {
        name: 'transport.heartbeat_interval_ms',
        source: { source: 'file', path: 'shared.yaml', line: 5 },
        group: 'transport',
      },
      {
        name: 'KVREUSE_TRANSPORT_HEARTBEAT_INTERVAL_MS',
        source: { source: 'env', variable: 'KVREUSE_TRANSPORT_HEARTBEAT_INTERVAL_MS' },
        group: 'transport',
      },
      {
        name: '--transport-heartbeat-misses',
        source: { source: 'argv', flag: '--transport-heartbeat-misses' },
        group: 'transport',
      },
      {
        name: '--no-transport-heartbeat',
        source: { source: 'argv', flag: '--no-transport-heartbeat' },
        group: 'transport',
      },
    ]);
  });

  it('still refuses, under ignore, a name inside a composed group that no setting has, with the closest name', () => {
    const router = defineSettings([routerGroup], { foreignGroups: 'ignore' });
    const error = thrown(
      () =>
        router.resolve({
          file: { text: 'router:\n  minimum_transfer_prefix_block: 8\nlease_ttl_ms: 1000\n', origin: 'k.yaml' },
          env: { KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOKS: '1', KVREUSE_NOPE: '1' },
          argv: ['--router-minimum-transfer-prefix-block=3', 'serve'],
        }),
      UnknownSettingError,
    );
    expect(error.unknown).toEqual([
      {
        name: 'router.minimum_transfer_prefix_block',
        source: { source: 'file', path: 'k.yaml', line: 2 },
        closest: 'router.minimum_transfer_prefix_blocks',
      },
      { name: 'lease_ttl_ms', source: { source: 'file', path: 'k.yaml', line: 3 }, closest: 'router' },
      {
        name: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOKS',
        source: { source: 'env', variable: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOKS' },
        closest: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS',
      },
      {
        name: 'KVREUSE_NOPE',
        source: { source: 'env', variable: 'KVREUSE_NOPE' },
        closest: 'KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_REUSE',
      },
      {
        name: '--router-minimum-transfer-prefix-block',
        source: { source: 'argv', flag: '--router-minimum-transfer-prefix-block' },
        closest: '--router-minimum-transfer-prefix-blocks',
      },
      { name: 'serve', source: { source: 'argv', flag: 'serve' } },
    ]);
  });

  it('resolves the newer group where it is composed', () => {
    const { settings, ignored } = defineSettings([routerGroup, transportGroup]).resolve({
      file: { text: 'router:\n  minimum_transfer_prefix_blocks: 8\ntransport:\n  backend: loopback\n' },
    });
    expect(settings.transport.backend).toBe('loopback');
    expect(ignored).toEqual([]);
  });
});

describe('resolve: errors name each setting as it was written', () => {
  it('names a bad file value by its file key and line, an env value by its variable, an argv value by its flag', () => {
    const error = thrown(
      () =>
        defineSettings([routerGroup]).resolve({
          file: { text: '# ops\nrouter:\n  minimum_transfer_prefix_blocks: 0\n', origin: 'ops.yaml' },
          env: { KVREUSE_ROUTER_TRANSFER_SOURCE_ESTIMATED_BLOCK_US: '-1' },
          argv: ['--router-minimum-estimated-ttft-saving-ms', 'soon'],
        }),
      InvalidSettingError,
    );
    expect(error.invalid.map(({ setting, name, source }) => [setting, name, source])).toEqual([
      [
        'router.minimumTransferPrefixBlocks',
        'router.minimum_transfer_prefix_blocks',
        { source: 'file', path: 'ops.yaml', line: 3 },
      ],
      [
        'router.transferSourceEstimatedBlockUs',
        'KVREUSE_ROUTER_TRANSFER_SOURCE_ESTIMATED_BLOCK_US',
        { source: 'env', variable: 'KVREUSE_ROUTER_TRANSFER_SOURCE_ESTIMATED_BLOCK_US' },
      ],
      [
        'router.minimumEstimatedTtftSavingMs',
        '--router-minimum-estimated-ttft-saving-ms',
        { source: 'argv', flag: '--router-minimum-estimated-ttft-saving-ms' },
      ],
    ]);
    expect(error.message).toContain('  - router.minimum_transfer_prefix_blocks = 0 in file ops.yaml:3: ');
    expect(error.message).toContain('  - KVREUSE_ROUTER_TRANSFER_SOURCE_ESTIMATED_BLOCK_US = "-1" in env: ');
    expect(error.message).toContain('  - --router-minimum-estimated-ttft-saving-ms = "soon" in argv: ');
    expect(error.message).not.toContain('router.minimumTransferPrefixBlocks');
  });
});

describe('resolve: a number from env or argv is the number written', () => {
  it('refuses one with more digits than a number keeps, or an integer past 2^53 − 1, naming the variable or flag', () => {
    const error = thrown(
      () =>
        defineSettings([routerGroup]).resolve({
          env: { KVREUSE_ROUTER_MINIMUM_ESTIMATED_TTFT_SAVING_MS: '0.99999999999999999' },
          argv: ['--router-minimum-transfer-prefix-blocks', '9007199254740993'],
        }),
      InvalidSettingError,
    );
    expect(error.invalid.map(({ setting, source, reason }) => [setting, source, reason])).toEqual([
      [
        'router.minimumEstimatedTtftSavingMs',
        { source: 'env', variable: 'KVREUSE_ROUTER_MINIMUM_ESTIMATED_TTFT_SAVING_MS' },
        expect.stringContaining('cannot read "0.99999999999999999" as a number without changing it: it would be 1 '),
      ],
      [
        'router.minimumTransferPrefixBlocks',
        { source: 'argv', flag: '--router-minimum-transfer-prefix-blocks' },
        expect.stringContaining(
          'cannot read "9007199254740993" as a number without changing it: it would be 9007199254740992 ',
        ),
      ],
    ]);
  });
});

describe('resolve: a number in a YAML or JSON file is the number written', () => {
  it.each([
    {
      format: 'yaml' as const,
      text: 'router:\n  minimum_estimated_ttft_saving_ms: 0.99999999999999999\n  minimum_transfer_prefix_blocks: 9007199254740993\n',
    },
    {
      format: 'json' as const,
      text: '{\n  "router": {\n    "minimum_estimated_ttft_saving_ms": 0.99999999999999999,\n    "minimum_transfer_prefix_blocks": 9007199254740993\n  }\n}\n',
    },
  ])('refuses one the $format parser would read otherwise, naming the file and the setting', ({ format, text }) => {
    const origin = `ops.${format}`;
    const error = thrown(
      () => defineSettings([routerGroup]).resolve({ file: { text, format, origin } }),
      InvalidSettingError,
    );
    const line = format === 'yaml' ? 2 : 3;
    expect(error.invalid.map(({ setting, source, reason }) => [setting, source, reason])).toEqual([
      [
        'router.minimumEstimatedTtftSavingMs',
        { source: 'file', path: origin, line },
        'cannot read "0.99999999999999999" as a number without changing it: it would be 1 (a number keeps 15 significant digits, between 1e-307 and 1e308 in size)',
      ],
      [
        'router.minimumTransferPrefixBlocks',
        { source: 'file', path: origin, line: line + 1 },
        'cannot read "9007199254740993" as a number without changing it: it would be 9007199254740992 (a number keeps 15 significant digits, between 1e-307 and 1e308 in size)',
      ],
    ]);
    expect(error.message).toContain(
      `  - router.minimum_estimated_ttft_saving_ms = 1 in file ${origin}:${line}: cannot read "0.99999999999999999"`,
    );
  });

  it('refuses a YAML hexadecimal or octal integer the parser would read otherwise, naming the setting and the text', () => {
    const text =
      'router:\n  minimum_estimated_ttft_saving_ms: 0o400000000000000001\n  minimum_transfer_prefix_blocks: 0x20000000000001\n';
    const error = thrown(
      () => defineSettings([routerGroup]).resolve({ file: { text, origin: 'ops.yaml' } }),
      InvalidSettingError,
    );
    const unchanged = (written: string) =>
      `cannot read "${written}" as a number without changing it: it would be 9007199254740992 (9007199254740993 as written; a number holds every integer up to 9007199254740991 exactly)`;
    expect(error.invalid.map(({ setting, source, reason }) => [setting, source, reason])).toEqual([
      [
        'router.minimumEstimatedTtftSavingMs',
        { source: 'file', path: 'ops.yaml', line: 2 },
        unchanged('0o400000000000000001'),
      ],
      [
        'router.minimumTransferPrefixBlocks',
        { source: 'file', path: 'ops.yaml', line: 3 },
        unchanged('0x20000000000001'),
      ],
    ]);
    expect(error.message).toContain(
      '  - router.minimum_transfer_prefix_blocks = 9007199254740992 in file ops.yaml:3: cannot read "0x20000000000001"',
    );
  });

  it('takes one written with more digits than it needs, or in another form YAML reads', () => {
    const { settings } = defineSettings([routerGroup]).resolve({
      file: { text: 'router:\n  minimum_estimated_ttft_saving_ms: 2.50000\n  minimum_transfer_prefix_blocks: 0x10\n' },
    });
    expect(settings.router).toMatchObject({ minimumEstimatedTtftSavingMs: 2.5, minimumTransferPrefixBlocks: 16 });
  });
});

describe('resolve: keys an object would take for its own machinery', () => {
  it('refuses __proto__, constructor and prototype in a YAML or JSON file as unknown names, never leaving one out', () => {
    const settings = defineSettings([routerGroup]);
    const names = (file: { text: string; format: 'yaml' | 'json' }) =>
      thrown(() => settings.resolve({ file }), UnknownSettingError).unknown.map(({ name }) => name);
    expect(names({ text: 'router:\n  __proto__: 5\n  constructor: 5\n  prototype: 5\n', format: 'yaml' })).toEqual([
      'router.__proto__',
      'router.constructor',
      'router.prototype',
    ]);
    expect(
      names({ text: '{ "__proto__": { "router": 5 }, "constructor": 1, "prototype": 1 }', format: 'json' }),
    ).toEqual(['__proto__', 'constructor', 'prototype']);
  });

  it.each([
    { format: 'yaml' as const, text: 'constructor:\n  a: 1\nprototype:\n  b: 2\n__proto__:\n  c: 3\nno:\n  d: 4\n' },
    {
      format: 'json' as const,
      text: '{\n"constructor": {"a": 1},\n"prototype": {"b": 2},\n"__proto__": {"c": 3},\n"no": {"d": 4}\n}',
    },
  ])(
    "refuses a $format section named so, or no, under foreignGroups: 'ignore' too, as no other group's",
    ({ format, text }) => {
      const settings = defineSettings([routerGroup], { foreignGroups: 'ignore' });
      const error = thrown(() => settings.resolve({ file: { text, format, origin: 'shared' } }), UnknownSettingError);
      const line = format === 'yaml' ? 1 : 2;
      expect(error.unknown.map(({ name, source, foreignGroup }) => [name, source, foreignGroup])).toEqual(
        ['constructor', 'prototype', '__proto__', 'no'].map((name, index) => [
          name,
          { source: 'file', path: 'shared', line: line + index * (format === 'yaml' ? 2 : 1) },
          undefined,
        ]),
      );
      expect(error.message).toContain('constructor in file shared:');
    },
  );

  it("refuses a variable or flag of such a group under foreignGroups: 'ignore' too", () => {
    const settings = defineSettings([routerGroup], { foreignGroups: 'ignore' });
    const error = thrown(
      () => settings.resolve({ env: { KVREUSE_PROTOTYPE_A: '1' }, argv: ['--constructor-a', '1'] }),
      UnknownSettingError,
    );
    expect(error.unknown.map(({ name, foreignGroup }) => [name, foreignGroup])).toEqual([
      ['KVREUSE_PROTOTYPE_A', undefined],
      ['--constructor-a', undefined],
    ]);
  });
});

describe('resolve: a rule that throws', () => {
  it('is a broken group, not a broken setting: InvalidGroupError naming the rule, even from safeResolve', () => {
    const failure = new RangeError('parts past 8 are not written yet');
    const ratioGroup = defineGroup('ratio', {
      description: 'd',
      settings: { part: { schema: z.int().min(1), default: 1, description: 'part' } },
      rules: [
        {
          setting: 'part',
          related: [],
          rule: 'ratio.part divides 8',
          why: 'w',
          holds: ({ part }) => {
            if (part > 8) throw failure;
            return 8 % part === 0;
          },
        },
      ],
    });
    const error = thrown(
      () => defineSettings([ratioGroup]).safeResolve({ argv: ['--ratio-part', '16'] }),
      InvalidGroupError,
    );
    expect([error.code, error.group, error.problems, error.cause, error.message]).toEqual([
      'INVALID_GROUP',
      'ratio',
      ['the rule of setting part (ratio.part divides 8) threw instead of answering: parts past 8 are not written yet'],
      failure,
      'settings group ratio: the rule of setting part (ratio.part divides 8) threw instead of answering: parts past 8 are not written yet',
    ]);
  });
});

describe('resolve: options checked whole', () => {
  it('refuses a misspelt option naming the closest, even from safeResolve (a programmer error)', () => {
    const error = thrown(() => defineSettings([routerGroup]).safeResolve({ args: [] } as never), ResolveOptionsError);
    expect([error.code, error.option, error.closest]).toEqual(['INVALID_RESOLVE_OPTIONS', 'args', 'argv']);
  });
});
