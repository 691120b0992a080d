import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixedGroups } from './changesets.js';
import { isPlatformPackage, listPackages, readJson, type WorkspacePackage } from './workspace.js';

export interface ManifestProblem {
  packageDir: string;
  message: string;
}

interface ProjectConfig {
  references?: { path: string }[];
}

const exactVersion = /^\d+\.\d+\.\d+(-[\w.]+)?$/;
const caretRange = /^\^\d+\.\d+\.\d+(-[\w.]+)?$/;

// What a package installed from npm needs: its own dependencies as ranges, so that it deduplicates with
// the user's; the tools of the repository pinned exactly (the lockfile keeps the repo reproducible).
const rangeRules = {
  dependencies: { pattern: caretRange, rule: 'a caret range (^x.y.z)' },
  peerDependencies: { pattern: caretRange, rule: 'a caret range (^x.y.z)' },
  devDependencies: { pattern: exactVersion, rule: 'an exact version' },
} as const;

/** The exports a published package has: the in-repo source condition stripped. */
function publishedExports(exports: Record<string, unknown> | undefined): unknown {
  return Object.fromEntries(
    Object.entries(exports ?? {}).map(([key, entry]) => [
      key,
      typeof entry === 'object' && entry !== null
        ? Object.fromEntries(Object.entries(entry).filter(([condition]) => condition !== '@kvreuse/source'))
        : entry,
    ]),
  );
}

type Expect = (ok: boolean, message: string) => void;

/** Holds each dependency's range to its rule, and returns the packages of the repository (their folders) it depends on. */
function checkDependencyRanges(m: WorkspacePackage['manifest'], expect: Expect): string[] {
  const internal: string[] = [];
  for (const field of ['dependencies', 'devDependencies', 'peerDependencies'] as const) {
    for (const [name, range] of Object.entries(m[field] ?? {})) {
      if (name.startsWith('@kvreuse/')) {
        internal.push(name.slice('@kvreuse/'.length));
        expect(range === 'workspace:^', `${field}.${name} must be "workspace:^", is ${JSON.stringify(range)}`);
      } else if (name.startsWith('@kvreuse-internal/')) {
        // A private package of the workspace is never published: only the package's own tests may use it.
        expect(
          field === 'devDependencies' && range === 'workspace:^',
          `${field}.${name} is a private package of the repository: it may only be a devDependency, as "workspace:^"`,
        );
      } else {
        const { pattern, rule } = rangeRules[field];
        expect(pattern.test(range), `${field}.${name} must be ${rule}, is ${JSON.stringify(range)}`);
      }
    }
  }
  return internal;
}

function problemsOf(pkg: WorkspacePackage, rootReferences: Set<string>, license: string): string[] {
  const { manifest: m, dir } = pkg;
  const problems: string[] = [];
  const expect: Expect = (ok, message) => {
    if (!ok) problems.push(message);
  };
  expect(m.name === `@kvreuse/${dir}`, `name is ${JSON.stringify(m.name)}, expected "@kvreuse/${dir}"`);
  expect(m.type === 'module', 'type must be "module" (ESM only)');
  expect(m.sideEffects === false, 'sideEffects must be false');
  expect(m.license === 'Apache-2.0', `license is ${JSON.stringify(m.license)}, expected "Apache-2.0"`);
  expect(m.publishConfig?.access === 'public', 'publishConfig.access must be "public"');
  expect(m.files?.includes('dist') === true, 'files must include "dist"');
  expect(
    JSON.stringify(m.publishConfig?.exports) === JSON.stringify(publishedExports(m.exports)),
    'publishConfig.exports must be exports without the "@kvreuse/source" condition (what npm users resolve)',
  );
  expect(
    existsSync(join(pkg.path, 'LICENSE')) && readFileSync(join(pkg.path, 'LICENSE'), 'utf8') === license,
    "LICENSE must be a copy of the repository's LICENSE (each package ships its own)",
  );
  expect(
    m.dependencies?.['zod'] === undefined,
    'zod must be a peerDependency, not a dependency: schemas cross package boundaries, so there must be one copy',
  );

  const entry = m.exports?.['.'] as Record<string, unknown> | undefined;
  expect(entry?.['@kvreuse/source'] === './src/index.ts', 'exports["."]["@kvreuse/source"] must be "./src/index.ts"');
  expect(entry?.['types'] === './dist/index.d.ts', 'exports["."].types must be "./dist/index.d.ts"');
  expect(entry?.['default'] === './dist/index.js', 'exports["."].default must be "./dist/index.js"');
  expect(existsSync(join(pkg.path, 'src/index.ts')), 'src/index.ts, the public face, is missing');

  for (const hook of ['preinstall', 'install', 'postinstall']) {
    expect(
      m.scripts?.[hook] === undefined,
      `scripts.${hook} must be absent: installing a package runs nothing (npm 11 asks users to approve install scripts)`,
    );
  }
  for (const script of ['build', 'typecheck', 'lint', 'test']) {
    expect(typeof m.scripts?.[script] === 'string', `scripts.${script} is missing`);
  }

  const readme = join(pkg.path, 'README.md');
  expect(
    existsSync(readme) && /```(ts|typescript)\n/.test(readFileSync(readme, 'utf8')),
    'README.md must exist and hold a usage example in a ```ts block',
  );
  expect(
    existsSync(readme) && readFileSync(readme, 'utf8').includes('](../../docs/glossary.md)'),
    'README.md must link the glossary (../../docs/glossary.md)',
  );

  const internal = checkDependencyRanges(m, expect);

  const build = readJson<ProjectConfig>(join(pkg.path, 'tsconfig.build.json'));
  const referenced = (build.references ?? [])
    .map((r) => r.path.replace(/^\.\.\/([^/]+)\/tsconfig\.build\.json$/, '$1'))
    .sort();
  expect(
    JSON.stringify(referenced) === JSON.stringify([...internal].sort()),
    `tsconfig.build.json references [${referenced.join(', ')}] but the package depends on [${internal.sort().join(', ')}]: tsc -b needs exactly its dependencies`,
  );
  expect(
    rootReferences.has(`packages/${dir}/tsconfig.build.json`),
    `the root tsconfig.json does not reference packages/${dir}/tsconfig.build.json`,
  );
  return problems;
}

/**
 * What a platform package must be: the one library file for the `os`, `cpu` and `libc` it names, built by
 * its `build` script, nothing to run at install, and an optional dependency of @kvreuse/native-bindings
 * (`optionalDependencies`, so that npm skips it where it does not fit).
 */
function platformProblemsOf(
  pkg: WorkspacePackage,
  bindings: WorkspacePackage | undefined,
  license: string,
  fixed: string[][],
): string[] {
  const { manifest: m, dir } = pkg;
  const problems: string[] = [];
  const expect = (ok: boolean, message: string): void => {
    if (!ok) problems.push(message);
  };
  const platform = /^native-(linux)-(x64|arm64)-(gnu)$/.exec(dir);
  expect(
    platform !== null,
    `packages/${dir} names a cpu, so it is a platform package, but is not named native-linux-<x64|arm64>-gnu`,
  );
  expect(m.name === `@kvreuse/${dir}`, `name is ${JSON.stringify(m.name)}, expected "@kvreuse/${dir}"`);
  if (platform !== null) {
    const [, os, cpu] = platform;
    expect(JSON.stringify(m.os) === JSON.stringify([os]), `os must be ["${os}"]`);
    expect(JSON.stringify(m.cpu) === JSON.stringify([cpu]), `cpu must be ["${cpu}"]`);
    expect(JSON.stringify(m.libc) === JSON.stringify(['glibc']), 'libc must be ["glibc"]');
  }
  expect(
    JSON.stringify(m.files) === JSON.stringify(['libkvreuse_transport.so']),
    'files must be ["libkvreuse_transport.so"], the library alone',
  );
  expect(m.license === 'Apache-2.0', `license is ${JSON.stringify(m.license)}, expected "Apache-2.0"`);
  expect(m.publishConfig?.access === 'public', 'publishConfig.access must be "public"');
  expect(m.repository?.directory === `packages/${dir}`, `repository.directory must be "packages/${dir}"`);
  expect(
    existsSync(join(pkg.path, 'LICENSE')) && readFileSync(join(pkg.path, 'LICENSE'), 'utf8') === license,
    "LICENSE must be a copy of the repository's LICENSE (each package ships its own)",
  );
  expect(
    JSON.stringify(Object.keys(m.scripts ?? {})) === JSON.stringify(['build', 'lint']),
    'scripts must be "build" and "lint" alone (no install script)',
  );
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies'] as const) {
    expect(m[field] === undefined, `${field} must be absent: the package holds a library and nothing else`);
  }
  // The JavaScript and the library it loads are one release: the exact version, never a range.
  expect(
    bindings?.manifest.optionalDependencies?.[m.name ?? ''] === 'workspace:*',
    `@kvreuse/native-bindings must list ${m.name} in optionalDependencies as "workspace:*" (published as its exact version)`,
  );
  expect(
    fixed.some((group) => group.includes(m.name ?? '') && group.includes('@kvreuse/native-bindings')),
    `.changeset/config.json must release ${m.name} with @kvreuse/native-bindings in one "fixed" group (always the same version)`,
  );
  return problems;
}

/** What every published package must be: see DEVELOPERS.md and issue 2's "Every package". */
export function checkManifests(repoRoot: string): ManifestProblem[] {
  const root = readJson<ProjectConfig>(join(repoRoot, 'tsconfig.json'));
  const rootReferences = new Set((root.references ?? []).map((r) => r.path));
  const license = readFileSync(join(repoRoot, 'LICENSE'), 'utf8');
  const packages = listPackages(repoRoot);
  const bindings = packages.find((pkg) => pkg.dir === 'native-bindings');
  const fixed = fixedGroups(repoRoot);
  return packages.flatMap((pkg) =>
    (isPlatformPackage(pkg.manifest)
      ? platformProblemsOf(pkg, bindings, license, fixed)
      : problemsOf(pkg, rootReferences, license)
    ).map((message) => ({
      packageDir: pkg.dir,
      message,
    })),
  );
}
