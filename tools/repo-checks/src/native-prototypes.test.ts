import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  bindingFunctions,
  bindingsPath,
  checkNativePrototypes,
  compareNativePrototypes,
  headerFunctions,
  headerPath,
  readHeader,
} from './native-prototypes.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('the repository', () => {
  it('binds every native function with the prototype the C header declares', () => {
    expect(checkNativePrototypes(repoRoot)).toEqual([]);
  });
});

describe('compareNativePrototypes', () => {
  const header = headerFunctions(
    [
      '/* KVT_API int32_t kvt_commented(void); */',
      'KVT_API kvt_status kvt_send(uint32_t agent, const uint8_t *data,',
      '                            uint32_t length);',
      'KVT_API const char *kvt_name(uint32_t index);',
    ].join('\n'),
  );
  const bindings = (entries: string): ReturnType<typeof bindingFunctions> =>
    bindingFunctions(`const prototypes = {\n${entries}\n};\n`);

  it('reads multi-line declarations and joined prototype strings alike', () => {
    expect([...header.keys()]).toEqual(['kvt_send', 'kvt_name']);
    const bound = bindings(
      "  kvt_send:\n    'int32_t kvt_send(uint32_t agent, ' +\n    'const uint8_t* bytes, uint32_t n)',\n  kvt_name: 'const char *kvt_name(uint32_t i)',",
    );
    expect(compareNativePrototypes(header, bound)).toEqual([]);
  });

  it('names a function the header does not declare', () => {
    expect(compareNativePrototypes(header, bindings("  kvt_gone: 'int32_t kvt_gone(void)',"))).toEqual([
      'kvt_gone: bound in packages/native-bindings/src/library.ts but not declared in native/include/kvreuse_transport.h',
    ]);
  });

  it('names a different argument count, argument type or return type', () => {
    const problems = compareNativePrototypes(
      header,
      bindings(
        [
          "  kvt_send: 'int32_t kvt_send(uint32_t agent, const uint8_t *data)',",
          "  kvt_name: 'int32_t kvt_name(uint64_t index)',",
        ].join('\n'),
      ),
    );
    expect(problems).toEqual([
      'kvt_send: native/include/kvreuse_transport.h declares int32_t (uint32_t, const uint8_t *, uint32_t), packages/native-bindings/src/library.ts binds int32_t (uint32_t, const uint8_t *)',
      'kvt_name: native/include/kvreuse_transport.h declares const char * (uint32_t), packages/native-bindings/src/library.ts binds int32_t (uint64_t)',
    ]);
  });

  it('refuses a prototype bound under another name, or one it cannot read', () => {
    expect(() => bindings("  kvt_a: 'int32_t kvt_b(void)',")).toThrow('the prototype of kvt_a declares kvt_b');
    expect(() => bindings('  kvt_a: `int32_t kvt_a(void)`,')).toThrow('cannot read the prototypes of kvt_a');
  });

  it('reads the headers the C header includes', () => {
    expect(headerFunctions(readHeader(join(repoRoot, headerPath))).get('kvt_fault_clear')).toEqual({
      returns: 'int32_t',
      parameters: ['uint32_t'],
    });
  });

  it('reads every prototype of the repository', () => {
    const bound = bindingFunctions(readFileSync(join(repoRoot, bindingsPath), 'utf8'));
    expect(bound.get('kvt_template_register')).toEqual({
      returns: 'int32_t',
      parameters: ['uint32_t', 'uint32_t', 'uint64_t', 'const kvt_template_routes *', 'uint32_t *'],
    });
    expect(bound.size).toBeGreaterThan(40);
  });
});
