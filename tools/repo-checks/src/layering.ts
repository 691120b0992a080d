import { builtinModules } from 'node:module';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { layerIndex, layerOrder } from './layers.js';
import {
  isPlatformPackage,
  isShippedSource,
  listExamples,
  listPackages,
  listSourceFiles,
  readJson,
  type PackageManifest,
  type WorkspacePackage,
} from './workspace.js';

export type LayeringRule =
  'unknown-layer' | 'upward-dependency' | 'upward-import' | 'deep-import' | 'relative-escape' | 'undeclared-import';

export interface LayeringViolation {
  rule: LayeringRule;
  /** The package folder under packages/, or `examples`. */
  packageDir: string;
  /** The file, relative to the package, or package.json for a manifest problem. */
  file: string;
  specifier: string;
  message: string;
}

const builtins = new Set(builtinModules);

function packageNameOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

function declaredIn(manifest: PackageManifest, name: string, fields: (keyof PackageManifest)[]): boolean {
  return fields.some((field) => {
    const deps = manifest[field] as Record<string, string> | undefined;
    return deps !== undefined && name in deps;
  });
}

/** The private packages of the workspace under tools/ (`@kvreuse-internal/<name>`), by name. */
function privatePackages(repoRoot: string): Map<string, PackageManifest> {
  const toolsDir = join(repoRoot, 'tools');
  if (!existsSync(toolsDir)) return new Map();
  return new Map(
    readdirSync(toolsDir)
      .filter((dir) => existsSync(join(toolsDir, dir, 'package.json')))
      .map((dir) => readJson<PackageManifest>(join(toolsDir, dir, 'package.json')))
      .map((manifest) => [manifest.name ?? '', manifest]),
  );
}

type Report = (rule: LayeringRule, file: string, specifier: string, message: string) => void;

/**
 * The layers a package lists must stand below it; so must the layers that a private package it lists (a
 * test-support package of tools/, in devDependencies) depends on, since its tests run that package's code.
 */
function checkListedLayers(
  manifest: PackageManifest,
  own: string,
  ownIndex: number,
  privates: Map<string, PackageManifest>,
  report: Report,
): void {
  const layersOf = (m: PackageManifest | undefined): string[] =>
    Object.keys({ ...m?.dependencies, ...m?.devDependencies, ...m?.peerDependencies }).filter((name) =>
      name.startsWith('@kvreuse/'),
    );
  const below = (name: string): boolean => {
    const index = layerIndex(name.slice('@kvreuse/'.length));
    return index >= 0 && index < ownIndex;
  };
  for (const field of ['dependencies', 'devDependencies', 'peerDependencies'] as const) {
    for (const name of Object.keys(manifest[field] ?? {})) {
      if (name.startsWith('@kvreuse/') && !below(name)) {
        report(
          'upward-dependency',
          'package.json',
          name,
          `${own} (layer ${ownIndex}) lists ${name} in ${field}, which is not a layer below it`,
        );
      }
      if (!name.startsWith('@kvreuse-internal/')) continue;
      for (const layer of layersOf(privates.get(name)).filter((layer) => !below(layer))) {
        report(
          'upward-dependency',
          'package.json',
          name,
          `${own} (layer ${ownIndex}) lists ${name} in ${field}, which depends on ${layer}, not a layer below ${own}`,
        );
      }
    }
  }
}

/** A package whose imports are checked: its layer's index, the name it is called by, and which of its files ship to its users. */
interface CheckedPackage {
  readonly pkg: WorkspacePackage;
  readonly ownIndex: number;
  readonly name: string;
  readonly ships: (file: string) => boolean;
}

/** Every import of one of the package's source files: within the package, from a layer below, and declared in its manifest. */
function checkFileImports(
  repoRoot: string,
  rootManifest: PackageManifest,
  { pkg, ownIndex, name: own, ships }: CheckedPackage,
  file: string,
  report: Report,
): void {
  const text = readFileSync(join(pkg.path, file), 'utf8');
  const shipped = ships(file);
  // require() calls are looked for in JavaScript only: in ESM TypeScript a method named `require` is no import.
  for (const { fileName: specifier } of ts.preProcessFile(text, true, /\.[cm]?js$/.test(file)).importedFiles) {
    if (specifier.startsWith('.')) {
      const target = resolve(dirname(join(pkg.path, file)), specifier);
      if (target !== pkg.path && !target.startsWith(pkg.path + sep)) {
        report(
          'relative-escape',
          file,
          specifier,
          `${file} reaches out of ${relative(repoRoot, pkg.path)} to ${relative(repoRoot, target)}: import another package by its name`,
        );
      }
      continue;
    }
    if (specifier.startsWith('node:') || builtins.has(specifier)) continue;
    const name = packageNameOf(specifier);
    if (name.startsWith('@kvreuse/')) {
      const target = name.slice('@kvreuse/'.length);
      if (specifier !== name) {
        report('deep-import', file, specifier, `${file} imports ${specifier}: only the entry point ${name} is public`);
      }
      // Tests, benchmarks and scripts may use their own package through its public face.
      if (target === pkg.dir && !shipped) continue;
      if (layerIndex(target) < 0 || layerIndex(target) >= ownIndex) {
        report('upward-import', file, specifier, `${file} imports ${name}, which is not a layer below ${own}`);
        continue;
      }
    }
    const fields: (keyof PackageManifest)[] = shipped
      ? ['dependencies', 'peerDependencies']
      : ['dependencies', 'peerDependencies', 'devDependencies'];
    const declared =
      declaredIn(pkg.manifest, name, fields) || (!shipped && declaredIn(rootManifest, name, ['devDependencies']));
    if (!declared) {
      report(
        'undeclared-import',
        file,
        specifier,
        `${file} imports ${name}, which ${own} does not declare in ${fields.join(' or ')}${shipped ? '' : ' (nor the root devDependencies)'}`,
      );
    }
  }
}

/**
 * Checks the rule of the layers (docs/architecture.md): a package imports only packages below it, only
 * through their entry points (`@kvreuse/<name>`, no deep paths; tests and benchmarks may also import
 * their own package that way), never reaches out of its folder with a relative path, and declares every
 * package it imports (shipped sources in `dependencies`/`peerDependencies`; tests, benchmarks and scripts
 * may also use the root's devDependencies). A private package it lists depends only on layers below it.
 * The examples stand above every layer and are held to the same rules: a user's program sees only the
 * entry points.
 */
export function checkLayering(repoRoot: string): LayeringViolation[] {
  const rootManifest = readJson<PackageManifest>(join(repoRoot, 'package.json'));
  const violations: LayeringViolation[] = [];
  const privates = privatePackages(repoRoot);
  // What each package ships to its users: a layer its src/ (not tests), the examples their programs (not test/).
  const checked: CheckedPackage[] = [
    ...listPackages(repoRoot)
      .filter((pkg) => !isPlatformPackage(pkg.manifest))
      .map((pkg) => ({ pkg, ownIndex: layerIndex(pkg.dir), name: `@kvreuse/${pkg.dir}`, ships: isShippedSource })),
    ...listExamples(repoRoot).map((pkg) => ({
      pkg,
      ownIndex: layerOrder.length,
      name: 'the examples',
      ships: (file: string) => !file.startsWith('test/'),
    })),
  ];

  for (const checkedPackage of checked) {
    const { pkg, ownIndex, name: own } = checkedPackage;
    const report = (rule: LayeringRule, file: string, specifier: string, message: string): void => {
      violations.push({ rule, packageDir: pkg.dir, file, specifier, message });
    };
    if (ownIndex < 0) {
      report(
        'unknown-layer',
        'package.json',
        pkg.dir,
        `packages/${pkg.dir} is not a layer (${layerOrder.join(', ')}): add it to tools/repo-checks/src/layers.ts in its place`,
      );
      continue;
    }

    checkListedLayers(pkg.manifest, own, ownIndex, privates, report);

    for (const file of listSourceFiles(pkg.path))
      checkFileImports(repoRoot, rootManifest, checkedPackage, file, report);
  }
  return violations;
}
