import fc from 'fast-check';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Path = readonly (string | number)[];

/** Values that sit on the edges parsers get wrong: signs, widths, types that look alike, and text that is not a number. */
const edgeValues: fc.Arbitrary<unknown> = fc.constantFrom(
  -1,
  0,
  -0,
  0.5,
  2 ** 16,
  2 ** 31,
  2 ** 32,
  2 ** 53,
  2 ** 64,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.MAX_VALUE,
  '',
  '-5',
  '0',
  '1e3',
  '0x10',
  '18446744073709551615',
  '18446744073709551616',
  ' 7',
  '\u0000',
  'x'.repeat(5000),
  true,
  false,
  null,
  [],
  {},
  [0],
  { value: 1 },
);

function pathsOf(value: Json, path: Path = []): Path[] {
  const here = [path];
  if (Array.isArray(value)) return here.concat(value.flatMap((item, index) => pathsOf(item, [...path, index])));
  if (value !== null && typeof value === 'object')
    return here.concat(Object.entries(value).flatMap(([key, item]) => pathsOf(item, [...path, key])));
  return here;
}

type Mutation =
  | { kind: 'replace'; path: Path; value: unknown }
  | { kind: 'delete'; path: Path }
  | { kind: 'add'; path: Path; key: string; value: unknown };

/**
 * A copy of a JSON value or an edge value (`-0`, `NaN` and `Infinity` stay): arrays and objects anew, as
 * structuredClone makes them at several times the cost.
 */
function copied(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copied);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, copied(item)]));
  return value;
}

function containerAt(root: unknown, path: Path): unknown {
  return path.reduce<unknown>(
    (node, step) =>
      node !== null && typeof node === 'object' ? (node as Record<string | number, unknown>)[step] : undefined,
    root,
  );
}

function apply(root: unknown, given: Mutation): unknown {
  // A value of its own: one fast-check hands out twice (while shrinking) must not make the data cyclic, which JSON never is.
  const mutation = given.kind === 'delete' ? given : { ...given, value: copied(given.value) };
  if (mutation.kind === 'add') {
    const target = containerAt(root, mutation.path);
    if (Array.isArray(target)) target.push(mutation.value);
    else if (target !== null && typeof target === 'object')
      (target as Record<string, unknown>)[mutation.key] = mutation.value;
    return root;
  }
  // JSON has no `undefined`: removing the whole value leaves `null`.
  if (mutation.path.length === 0) return mutation.kind === 'replace' ? mutation.value : null;
  const parent = containerAt(root, mutation.path.slice(0, -1));
  const last = mutation.path[mutation.path.length - 1] as string | number;
  if (parent === null || typeof parent !== 'object') return root;
  if (mutation.kind === 'replace') (parent as Record<string | number, unknown>)[last] = mutation.value;
  else if (Array.isArray(parent) && typeof last === 'number') parent.splice(last, 1);
  else delete (parent as Record<string | number, unknown>)[last];
  return root;
}

/**
 * A valid sample with one to four mutations: a node replaced by an edge value or by any JSON, a node
 * removed, a key or item added. Most cases stay close to valid, so they reach the checks past the first.
 */
export function mutatedJson(sample: Json): fc.Arbitrary<unknown> {
  const paths = pathsOf(sample);
  const containers = paths.filter((path) => {
    const node = containerAt(sample, path);
    return node !== null && typeof node === 'object';
  });
  const mutation: fc.Arbitrary<Mutation> = fc.oneof(
    fc.record({
      kind: fc.constant('replace' as const),
      path: fc.constantFrom(...paths),
      value: fc.oneof(edgeValues, fc.jsonValue({ maxDepth: 2 })),
    }),
    fc.record({ kind: fc.constant('delete' as const), path: fc.constantFrom(...paths) }),
    fc.record({
      kind: fc.constant('add' as const),
      path: fc.constantFrom(...containers),
      key: fc.string({ maxLength: 12 }),
      value: fc.oneof(edgeValues, fc.jsonValue({ maxDepth: 1 })),
    }),
  );
  return fc.array(mutation, { minLength: 1, maxLength: 4 }).map((mutations) => mutations.reduce(apply, copied(sample)));
}

/** Bytes of a valid sample with bytes flipped, cut, inserted or appended; or bytes of no sample at all. */
export function mutatedBytes(samples: readonly Uint8Array[]): fc.Arbitrary<Uint8Array> {
  const edit = fc.oneof(
    fc.record({ kind: fc.constant('set' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
    fc.record({ kind: fc.constant('cut' as const), at: fc.nat() }),
    fc.record({
      kind: fc.constant('insert' as const),
      at: fc.nat(),
      bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
    }),
  );
  const edited = fc
    .tuple(fc.constantFrom(...samples), fc.array(edit, { minLength: 1, maxLength: 4 }))
    .map(([sample, edits]) =>
      edits.reduce((bytes, change) => {
        const at = bytes.length === 0 ? 0 : change.at % (bytes.length + 1);
        if (change.kind === 'cut') return bytes.slice(0, at);
        if (change.kind === 'insert') {
          const grown = new Uint8Array(bytes.length + change.bytes.length);
          grown.set(bytes.subarray(0, at));
          grown.set(change.bytes, at);
          grown.set(bytes.subarray(at), at + change.bytes.length);
          return grown;
        }
        const copy = bytes.slice();
        if (at < copy.length) copy[at] = change.byte;
        return copy;
      }, sample),
    );
  return fc.oneof({ arbitrary: edited, weight: 4 }, { arbitrary: fc.uint8Array({ maxLength: 64 }), weight: 1 });
}

/** Text of a valid sample with characters replaced, removed or inserted. */
export function mutatedText(samples: readonly string[]): fc.Arbitrary<string> {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  return mutatedBytes(samples.map((text) => encoder.encode(text))).map((bytes) => decoder.decode(bytes));
}

export type { Json };
