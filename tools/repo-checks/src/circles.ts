import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { codeOnly, cFunctions, quotedIncludes } from './c-source.js';
import { listExamples, listPackages, listSourceFiles } from './workspace.js';

export type CircleKind = 'import' | 'include' | 'call';

export interface Circle {
  kind: CircleKind;
  /** The package or folder the circle is in, relative to the repository: `packages/registry`, `scripts`, `native`. */
  unit: string;
  /** Every file of the circle (a strongly connected set: each reaches each other), relative to `unit`, sorted. */
  files: string[];
  /** One closed path through the circle, from its first file back to it: `[a, b, a]`. */
  path: string[];
  /** Every edge between files of the circle: `[from, to]`, sorted. */
  edges: [string, string][];
  message: string;
}

/** A directed graph of files: each file to the files it depends on. */
export type Graph = Map<string, Set<string>>;

/**
 * The strongly connected sets of more than one file, or of one file that depends on itself (Tarjan's
 * algorithm, iterative), each sorted, in the order of their first file.
 */
export function stronglyConnected(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[][] = [];
  let next = 0;
  for (const root of [...graph.keys()].sort()) {
    if (index.has(root)) continue;
    const work: { node: string; targets: string[]; at: number }[] = [];
    const open = (node: string): void => {
      index.set(node, next);
      low.set(node, next);
      next++;
      stack.push(node);
      onStack.add(node);
      work.push({ node, targets: [...(graph.get(node) ?? [])].sort(), at: 0 });
    };
    open(root);
    while (work.length > 0) {
      const frame = work[work.length - 1] as (typeof work)[number];
      if (frame.at < frame.targets.length) {
        const target = frame.targets[frame.at++] as string;
        if (!index.has(target)) open(target);
        else if (onStack.has(target))
          low.set(frame.node, Math.min(low.get(frame.node) as number, index.get(target) as number));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent !== undefined)
        low.set(parent.node, Math.min(low.get(parent.node) as number, low.get(frame.node) as number));
      if (low.get(frame.node) === index.get(frame.node)) {
        const set: string[] = [];
        let member: string;
        do {
          member = stack.pop() as string;
          onStack.delete(member);
          set.push(member);
        } while (member !== frame.node);
        if (set.length > 1 || graph.get(frame.node)?.has(frame.node)) found.push(set.sort());
      }
    }
  }
  return found.sort((a, b) => ((a[0] as string) < (b[0] as string) ? -1 : 1));
}

/** The shortest closed path from `start` back to itself through files of `members` (breadth first). */
function shortestLoop(graph: Graph, start: string, members: Set<string>): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift() as string;
    for (const target of [...(graph.get(node) ?? [])].sort()) {
      if (!members.has(target)) continue;
      if (target === start) {
        const path = [start];
        for (let at: string | undefined = node; at !== start && at !== undefined; at = cameFrom.get(at))
          path.splice(1, 0, at);
        return [...path, start];
      }
      if (!cameFrom.has(target)) {
        cameFrom.set(target, node);
        queue.push(target);
      }
    }
  }
  return [start, start];
}

const verbs: Record<CircleKind, string> = { import: 'import', include: 'include', call: 'call functions of' };

/** The circles of a graph, as violations of `unit`. */
export function circlesOf(graph: Graph, kind: CircleKind, unit: string): Circle[] {
  return stronglyConnected(graph).map((files) => {
    const members = new Set(files);
    const path = shortestLoop(graph, files[0] as string, members);
    const edges = files.flatMap((from) =>
      [...(graph.get(from) ?? [])]
        .filter((to) => members.has(to))
        .sort()
        .map((to): [string, string] => [from, to]),
    );
    const who =
      files.length === 1
        ? `${files[0]} ${kind === 'call' ? 'calls' : `${kind}s`} itself`
        : `${files.join(', ')} ${verbs[kind]} each other in a circle`;
    return {
      kind,
      unit,
      files,
      path,
      edges,
      message: `${unit}: ${who}: ${path.join(' → ')}${files.length > 2 ? ` (${edges.length} ${kind}s between them)` : ''}`,
    };
  });
}

// --- TypeScript: relative imports within a package --------------------------------------------------

const isModule = (file: string): boolean => /\.(ts|mts|cts|js|mjs|cjs)$/.test(file) && !/\.d\.[mc]?ts$/.test(file);

/** The file a relative specifier names, as TypeScript's nodenext resolution finds it: `./a.js` is `./a.ts` in the sources. */
function resolveRelative(fromFile: string, specifier: string): string | undefined {
  const target = resolve(dirname(fromFile), specifier);
  const swaps: Record<string, string[]> = { '.js': ['.ts', '.tsx'], '.mjs': ['.mts'], '.cjs': ['.cts'] };
  const extension = /\.[mc]?js$/.exec(target)?.[0];
  const candidates = [
    ...(extension === undefined
      ? []
      : (swaps[extension] ?? []).map((swap) => target.slice(0, -extension.length) + swap)),
    target,
    ...['.ts', '.js', '/index.ts', '/index.js'].map((suffix) => target + suffix),
  ];
  return candidates.find((candidate) => existsSync(candidate) && statSync(candidate).isFile());
}

/** The graph of the modules of one folder: each to the modules inside the folder it imports by relative path, type-only imports included. */
export function importGraph(folder: string, files: string[]): Graph {
  const graph: Graph = new Map();
  for (const file of files) {
    const path = join(folder, file);
    const targets = new Set<string>();
    const text = readFileSync(path, 'utf8');
    for (const { fileName: specifier } of ts.preProcessFile(text, true, /\.[cm]?js$/.test(file)).importedFiles) {
      if (!specifier.startsWith('.')) continue;
      const target = resolveRelative(path, specifier);
      if (target === undefined || !target.startsWith(folder + sep) || !isModule(target)) continue;
      targets.add(relative(folder, target).split(sep).join('/'));
    }
    graph.set(file, targets);
  }
  return graph;
}

/** The folders whose modules must not import each other in a circle: every package and tool, the examples, and scripts/. */
function moduleFolders(repoRoot: string): { unit: string; path: string; files: string[] }[] {
  const tools = existsSync(join(repoRoot, 'tools'))
    ? readdirSync(join(repoRoot, 'tools'))
        .sort()
        .filter((dir) => existsSync(join(repoRoot, 'tools', dir, 'package.json')))
    : [];
  const folders = [
    ...listPackages(repoRoot).map((pkg) => ({ unit: `packages/${pkg.dir}`, path: pkg.path })),
    ...tools.map((dir) => ({ unit: `tools/${dir}`, path: join(repoRoot, 'tools', dir) })),
    ...listExamples(repoRoot).map((pkg) => ({ unit: 'examples', path: pkg.path })),
    ...(existsSync(join(repoRoot, 'scripts')) ? [{ unit: 'scripts', path: join(repoRoot, 'scripts') }] : []),
  ];
  return folders.map((folder) => ({
    ...folder,
    files: listSourceFiles(folder.path)
      .filter(isModule)
      .map((file) => file.split(sep).join('/')),
  }));
}

/** The circles among the modules of each package, tool, the examples and scripts/ (tests, benchmarks and scripts of a package included). */
export function checkImportCircles(repoRoot: string): Circle[] {
  return moduleFolders(repoRoot).flatMap(({ unit, path, files }) =>
    circlesOf(importGraph(path, files), 'import', unit),
  );
}

// --- C: the includes of project headers, and the calls between the files of the library -------------

/** The C files under each folder of native/, subfolders included (services/, backends/<name>/). */
function cFiles(repoRoot: string, folders: string[]): string[] {
  const under = (folder: string): string[] => {
    const path = join(repoRoot, 'native', folder);
    if (!existsSync(path)) return [];
    return readdirSync(path, { withFileTypes: true })
      .sort((a, b) => a.name.localeCompare(b.name))
      .flatMap((entry) =>
        entry.isDirectory()
          ? under(`${folder}/${entry.name}`)
          : /\.[ch]$/.test(entry.name)
            ? [`${folder}/${entry.name}`]
            : [],
      );
  };
  return folders.flatMap(under);
}

/**
 * The graph of `#include "…"` among the C files of native/ (src, include, test, fuzz): a header is looked
 * for beside the file, then in include/, src/ and test/, as the Makefile's -I flags say; system headers
 * and headers not in native/ are not part of it.
 */
export function includeGraph(repoRoot: string): Graph {
  const native = join(repoRoot, 'native');
  const graph: Graph = new Map();
  for (const file of cFiles(repoRoot, ['src', 'include', 'test', 'fuzz'])) {
    const targets = new Set<string>();
    for (const header of quotedIncludes(readFileSync(join(native, file), 'utf8'))) {
      const found = [dirname(file), 'include', 'src', 'test']
        .map((folder) => join(folder, header).split(sep).join('/'))
        .find((candidate) => existsSync(join(native, candidate)));
      if (found !== undefined) targets.add(found);
    }
    graph.set(file, targets);
  }
  return graph;
}

/**
 * The graph of calls between the .c files of the library (native/src): a file depends on another when
 * it names a function the other defines with external linkage (not `static`) and it does not define
 * itself. Calls through pointers and through macros are not seen.
 */
export function callGraph(repoRoot: string): Graph {
  const native = join(repoRoot, 'native');
  const files = cFiles(repoRoot, ['src']).filter((file) => file.endsWith('.c'));
  const texts = new Map(files.map((file) => [file, readFileSync(join(native, file), 'utf8')]));
  const definedIn = new Map<string, string>();
  const ownNames = new Map<string, Set<string>>();
  for (const [file, text] of texts) {
    const functions = cFunctions(text);
    ownNames.set(file, new Set(functions.map((fn) => fn.name)));
    for (const fn of functions) if (!fn.isStatic) definedIn.set(fn.name, file);
  }
  const graph: Graph = new Map();
  for (const [file, text] of texts) {
    const targets = new Set<string>();
    const own = ownNames.get(file) as Set<string>;
    for (const [name] of codeOnly(text).matchAll(/[A-Za-z_]\w*/g)) {
      const target = definedIn.get(name);
      if (target !== undefined && target !== file && !own.has(name)) targets.add(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** The circles of includes among the C files of native/, and of calls among the .c files of the library. */
export function checkNativeCircles(repoRoot: string, kinds: CircleKind[] = ['include', 'call']): Circle[] {
  if (!existsSync(join(repoRoot, 'native'))) return [];
  return [
    ...(kinds.includes('include') ? circlesOf(includeGraph(repoRoot), 'include', 'native') : []),
    ...(kinds.includes('call') ? circlesOf(callGraph(repoRoot), 'call', 'native') : []),
  ];
}
