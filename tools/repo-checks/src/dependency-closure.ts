import { existsSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { readJson, type PackageManifest } from './workspace.js';

interface InstalledManifest extends PackageManifest {
  optionalDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/** The folder a package named `name` resolves to from `fromDir`, as Node looks it up (node_modules upwards); undefined when not installed. */
function installedAt(fromDir: string, name: string): string | undefined {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate);
    if (dirname(dir) === dir) return undefined;
  }
}

/**
 * What `npm install` of the package at `packageDir` brings in: its dependencies, optional dependencies
 * and required peer dependencies, and theirs in turn (peers marked optional are left to the user).
 * Returns the package names, each once; a dependency that is not installed here is named all the same.
 */
export function productionClosure(packageDir: string): Set<string> {
  const seen = new Set<string>();
  const visit = (dir: string): void => {
    const manifest = readJson<InstalledManifest>(join(dir, 'package.json'));
    const optionalPeers = manifest.peerDependenciesMeta ?? {};
    const names = [
      ...Object.keys(manifest.dependencies ?? {}),
      ...Object.keys(manifest.optionalDependencies ?? {}),
      ...Object.keys(manifest.peerDependencies ?? {}).filter((name) => optionalPeers[name]?.optional !== true),
    ];
    for (const name of names) {
      if (seen.has(name)) continue;
      seen.add(name);
      const at = installedAt(dir, name);
      if (at !== undefined) visit(at);
    }
  };
  visit(realpathSync(packageDir));
  return seen;
}
