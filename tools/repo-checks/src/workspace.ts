import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface PackageManifest {
  name?: string;
  version?: string;
  type?: string;
  license?: string;
  sideEffects?: boolean;
  files?: string[];
  exports?: Record<string, unknown>;
  scripts?: Record<string, string>;
  publishConfig?: { access?: string; exports?: Record<string, unknown> };
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  os?: string[];
  cpu?: string[];
  libc?: string[];
  repository?: { directory?: string };
}

export interface WorkspacePackage {
  /** Folder name under packages/, which is also the layer name (`examples` for the examples). */
  dir: string;
  path: string;
  manifest: PackageManifest;
}

export function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

export function listPackages(repoRoot: string): WorkspacePackage[] {
  const packagesDir = join(repoRoot, 'packages');
  return readdirSync(packagesDir)
    .filter((dir) => existsSync(join(packagesDir, dir, 'package.json')))
    .sort()
    .map((dir) => ({
      dir,
      path: join(packagesDir, dir),
      manifest: readJson<PackageManifest>(join(packagesDir, dir, 'package.json')),
    }));
}

/**
 * Whether a package is a platform package: the native library prebuilt for one `os`/`cpu`/`libc`
 * (`@kvreuse/native-linux-x64-gnu`, …), no code and no layer, installed as an optional dependency of
 * @kvreuse/native-bindings where it fits.
 */
export function isPlatformPackage(manifest: PackageManifest): boolean {
  return manifest.cpu !== undefined;
}

/** The examples (`examples/`), a workspace package of programs that use the layers as a user does; none in a tree without it. */
export function listExamples(repoRoot: string): WorkspacePackage[] {
  const path = join(repoRoot, 'examples');
  return existsSync(join(path, 'package.json'))
    ? [{ dir: 'examples', path, manifest: readJson<PackageManifest>(join(path, 'package.json')) }]
    : [];
}

const sourceExtensions = /\.(ts|mts|cts|js|mjs|cjs)$/;
const isToolConfig = (packagePath: string, path: string): boolean =>
  /^[^/]+\.config\.[a-z]+$/.test(relative(packagePath, path));

const skippedFolders = new Set(['node_modules', 'dist', 'build', '.turbo', 'coverage']);

/** Every source file of a package, relative to the package folder, sorted; tool configs at its top are not its code. */
export function listSourceFiles(packagePath: string): string[] {
  const found: string[] = [];
  const walk = (folder: string): void => {
    for (const entry of readdirSync(folder)) {
      if (skippedFolders.has(entry)) continue;
      const path = join(folder, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (sourceExtensions.test(entry) && !entry.endsWith('.d.ts') && !isToolConfig(packagePath, path)) {
        found.push(relative(packagePath, path));
      }
    }
  };
  walk(packagePath);
  return found.sort();
}

/** Files that ship in the package (under src/, not tests) as opposed to tests, benchmarks and scripts. */
export function isShippedSource(file: string): boolean {
  return file.startsWith('src/') && !/\.test\.[a-z]+$/.test(file);
}
