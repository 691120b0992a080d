// The publishable packages of the workspace, packed as a release publishes them: `pnpm pack` applies
// `publishConfig` (the published `exports`) and turns `workspace:^` ranges into versions, as
// `changeset publish` (pnpm publish) does; `npm pack` would do neither.
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runToSuccess } from './run.js';

export interface PublishablePackage {
  /** `@kvreuse/<dir>`. */
  name: string;
  dir: string;
  path: string;
  /** The `@kvreuse/*` packages it depends on at run time, directly or through another. */
  kvreuseDependencies: string[];
}

interface Manifest {
  name: string;
  private?: boolean;
  cpu?: string[];
  dependencies?: Record<string, string>;
}

function manifestsOf(repoRoot: string): { dir: string; manifest: Manifest }[] {
  return readdirSync(join(repoRoot, 'packages'))
    .sort()
    .map((dir) => ({
      dir,
      manifest: JSON.parse(readFileSync(join(repoRoot, 'packages', dir, 'package.json'), 'utf8')) as Manifest,
    }))
    .filter(({ manifest }) => manifest.private !== true);
}

/** The platform package (the native library prebuilt for one cpu) that npm installs on this machine. */
export function platformPackage(repoRoot: string): PublishablePackage {
  const found = manifestsOf(repoRoot).find(({ manifest }) => manifest.cpu?.includes(process.arch) === true);
  if (found === undefined) throw new Error(`no package of packages/ is prebuilt for cpu ${process.arch}`);
  return {
    name: found.manifest.name,
    dir: found.dir,
    path: join(repoRoot, 'packages', found.dir),
    kvreuseDependencies: [],
  };
}

/** Every package under `packages/` that is not private and not a platform package, in folder order. */
export function publishablePackages(repoRoot: string): PublishablePackage[] {
  const manifests = manifestsOf(repoRoot).filter(({ manifest }) => manifest.cpu === undefined);
  const direct = new Map(
    manifests.map(({ manifest }) => [
      manifest.name,
      Object.keys(manifest.dependencies ?? {}).filter((name) => name.startsWith('@kvreuse/')),
    ]),
  );
  const closure = (name: string, seen = new Set<string>()): Set<string> => {
    for (const dependency of direct.get(name) ?? []) {
      if (!seen.has(dependency)) closure(dependency, seen.add(dependency));
    }
    return seen;
  };
  return manifests.map(({ dir, manifest }) => ({
    name: manifest.name,
    dir,
    path: join(repoRoot, 'packages', dir),
    kvreuseDependencies: [...closure(manifest.name)].sort(),
  }));
}

/**
 * Packs the packages with one `pnpm --recursive pack` (one pnpm, which packs two at a time, instead of
 * one pnpm each) into `destination`; returns each package's tarball by name. pnpm names a tarball after
 * the package and its version (`@kvreuse/router` 0.1.0: `kvreuse-router-0.1.0.tgz`).
 */
export function packPackages(
  repoRoot: string,
  packages: readonly PublishablePackage[],
  destination: string,
): Map<string, string> {
  mkdirSync(destination, { recursive: true });
  const filters = packages.flatMap((pkg) => ['--filter', pkg.name]);
  runToSuccess('pnpm', ['--recursive', ...filters, 'pack', '--pack-destination', destination], { cwd: repoRoot });
  const written = new Set(readdirSync(destination));
  return new Map(
    packages.map((pkg) => {
      const { version } = JSON.parse(readFileSync(join(pkg.path, 'package.json'), 'utf8')) as { version: string };
      const tarball = `${pkg.name.replace(/^@/, '').replace('/', '-')}-${version}.tgz`;
      if (!written.has(tarball))
        throw new Error(
          `pnpm pack of ${pkg.name} wrote no ${tarball} into ${destination}: [${[...written].join(', ')}]`,
        );
      return [pkg.name, join(destination, tarball)];
    }),
  );
}
