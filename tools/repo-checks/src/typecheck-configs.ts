import { existsSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { isPlatformPackage, readJson, type PackageManifest } from './workspace.js';

export interface TypecheckConfigProblem {
  /** The project's folder, relative to the repository: `packages/drain`, `tools/fuzz`. */
  project: string;
  message: string;
}

interface TypecheckConfig {
  include?: string[];
  references?: { path: string }[];
}

/** The workspace projects that have a typecheck config (tsconfig.json): the packages but the platform ones, and the tools. */
function typecheckedProjects(repoRoot: string): string[] {
  return ['packages', 'tools'].flatMap((folder) =>
    readdirSync(join(repoRoot, folder))
      .map((dir) => `${folder}/${dir}`)
      .filter(
        (project) =>
          existsSync(join(repoRoot, project, 'tsconfig.json')) && existsSync(join(repoRoot, project, 'package.json')),
      )
      .filter((project) => !isPlatformPackage(readJson<PackageManifest>(join(repoRoot, project, 'package.json'))))
      .sort(),
  );
}

/**
 * What a project's typecheck must reference: its own build config (where it has one) and the build config
 * of every @kvreuse package it depends on. Through a reference, tsc reads a package's declarations
 * (dist/*.d.ts) instead of checking its sources again, which the `@kvreuse/source` condition would
 * otherwise resolve to; each source file is then checked once, by its own package's build.
 */
function expectedReferences(repoRoot: string, project: string): string[] {
  const manifest = readJson<PackageManifest>(join(repoRoot, project, 'package.json'));
  const own = existsSync(join(repoRoot, project, 'tsconfig.build.json')) ? ['./tsconfig.build.json'] : [];
  const dependencies = Object.keys({
    ...manifest.dependencies,
    ...manifest.devDependencies,
    ...manifest.peerDependencies,
  })
    .filter((name) => name.startsWith('@kvreuse/'))
    .map((name) => join('packages', name.slice('@kvreuse/'.length), 'tsconfig.build.json'))
    .filter((config) => existsSync(join(repoRoot, config)))
    .map((config) => relative(join(repoRoot, project), join(repoRoot, config)));
  return [...own, ...dependencies].sort();
}

/** Checks every project's tsconfig.json: the references above, and no shipped source included beside its own build. */
export function checkTypecheckConfigs(repoRoot: string): TypecheckConfigProblem[] {
  return typecheckedProjects(repoRoot).flatMap((project) => {
    const config = readJson<TypecheckConfig>(join(repoRoot, project, 'tsconfig.json'));
    const problems: string[] = [];
    const referenced = (config.references ?? []).map((reference) => reference.path).sort();
    const expected = expectedReferences(repoRoot, project);
    if (JSON.stringify(referenced) !== JSON.stringify(expected)) {
      problems.push(
        `tsconfig.json references [${referenced.join(', ')}] but must reference [${expected.join(', ')}]: ` +
          'its own build and the builds of the @kvreuse packages it depends on, so that tsc reads their declarations instead of checking their sources again',
      );
    }
    if (expected.includes('./tsconfig.build.json')) {
      for (const pattern of config.include ?? []) {
        if (pattern.startsWith('src/') && !pattern.endsWith('.test.ts')) {
          problems.push(
            `tsconfig.json includes "${pattern}": the package's own build checks its sources; the typecheck includes only its tests (src/**/*.test.ts)`,
          );
        }
      }
    }
    return problems.map((message) => ({ project, message }));
  });
}
