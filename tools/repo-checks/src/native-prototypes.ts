import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** One C function: its return type and its parameters' types, each with spacing normalised. */
export interface CFunction {
  readonly returns: string;
  readonly parameters: readonly string[];
}

export const headerPath = 'native/include/kvreuse_transport.h';
export const bindingsPath = 'packages/native-bindings/src/library.ts';

/** `const char*x` → `const char *`; the C header's typedef `kvt_status` is the int32_t koffi is told. */
function normaliseType(type: string): string {
  return type
    .replace(/\s+/g, ' ')
    .replace(/\s*\*\s*/g, ' *')
    .replace(/\bkvt_status\b/, 'int32_t')
    .trim();
}

/** Splits `int32_t kvt_x(uint32_t a, const char *b)` into its name and types (parameter names dropped). */
export function parsePrototype(prototype: string): [string, CFunction] {
  const match = /^\s*(.*?)\b(kvt_\w+)\s*\(([^)]*)\)\s*$/s.exec(prototype);
  if (match === null) throw new Error(`not a C prototype: ${prototype}`);
  const [, returns = '', name = '', list = ''] = match;
  const parameters =
    list.trim() === 'void' || list.trim() === ''
      ? []
      : list.split(',').map((parameter) => normaliseType(parameter.replace(/\w+\s*$/, '')));
  return [name, { returns: normaliseType(returns), parameters }];
}

/** Every `KVT_API` function the header declares. */
export function headerFunctions(header: string): Map<string, CFunction> {
  const withoutComments = header.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  const functions = new Map<string, CFunction>();
  for (const [, prototype = ''] of withoutComments.matchAll(/^KVT_API\s+([^;]+);/gm)) {
    functions.set(...parsePrototype(prototype));
  }
  return functions;
}

/** Every prototype string of the `prototypes` table in library.ts (adjacent string literals joined by `+`). */
export function bindingFunctions(source: string): Map<string, CFunction> {
  const start = source.indexOf('const prototypes');
  const end = source.indexOf('\n};', start);
  if (start < 0 || end < 0) throw new Error(`${bindingsPath} has no \`const prototypes\` table`);
  const table = source.slice(start, end);
  const functions = new Map<string, CFunction>();
  for (const [, key = '', literals = ''] of table.matchAll(/^\s+(kvt_\w+):\s*((?:'[^']*'\s*\+?\s*)+),?$/gm)) {
    const prototype = [...literals.matchAll(/'([^']*)'/g)].map(([, text]) => text).join('');
    const [name, fn] = parsePrototype(prototype);
    if (name !== key) throw new Error(`${bindingsPath}: the prototype of ${key} declares ${name}`);
    functions.set(name, fn);
  }
  const keys = [...table.matchAll(/^\s+(kvt_\w+):/gm)].map(([, key]) => key);
  const unread = keys.filter((key) => key !== undefined && !functions.has(key));
  if (unread.length > 0) throw new Error(`${bindingsPath}: cannot read the prototypes of ${unread.join(', ')}`);
  return functions;
}

function describe(fn: CFunction): string {
  return `${fn.returns} (${fn.parameters.join(', ')})`;
}

/** Where the koffi prototypes disagree with the header: one line per function, empty when they agree. */
export function compareNativePrototypes(header: Map<string, CFunction>, bindings: Map<string, CFunction>): string[] {
  const problems: string[] = [];
  for (const [name, bound] of bindings) {
    const declared = header.get(name);
    if (declared === undefined) problems.push(`${name}: bound in ${bindingsPath} but not declared in ${headerPath}`);
    else if (describe(declared) !== describe(bound)) {
      problems.push(`${name}: ${headerPath} declares ${describe(declared)}, ${bindingsPath} binds ${describe(bound)}`);
    }
  }
  return problems;
}

/** The header's text followed by that of each header it includes with quotes (beside it), recursively. */
export function readHeader(path: string, seen = new Set<string>()): string {
  seen.add(path);
  const text = readFileSync(path, 'utf8');
  const included = [...text.matchAll(/^#include "([^"]+)"/gm)]
    .map(([, name = '']) => join(dirname(path), name))
    .filter((file) => !seen.has(file));
  return [text, ...included.map((file) => readHeader(file, seen))].join('\n');
}

/** The repository's disagreements between the C header and the koffi prototypes. */
export function checkNativePrototypes(repoRoot: string): string[] {
  return compareNativePrototypes(
    headerFunctions(readHeader(join(repoRoot, headerPath))),
    bindingFunctions(readFileSync(join(repoRoot, bindingsPath), 'utf8')),
  );
}
