import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { listPackages, readJson, type WorkspacePackage } from './workspace.js';

export interface ManifestProblem {
  packageDir: string;
  message: string;
}

interface ProjectConfig {
  references?: { path: string }[];
}

const exactVersion = /^\d+\.\d+\.\d+(-[\w.]+)?$/;

function problemsOf(pkg: WorkspacePackage, rootReferences: Set<string>): string[] {
  const { manifest: m, dir } = pkg;
  const problems: string[] = [];
  const expect = (ok: boolean, message: string): void => {
    if (!ok) problems.push(message);
  };
  expect(m.name === `@kvreuse/${dir}`, `name is ${JSON.stringify(m.name)}, expected "@kvreuse/${dir}"`);
  expect(m.type === 'module', 'type must be "module" (ESM only)');
  expect(m.sideEffects === false, 'sideEffects must be false');
  expect(m.license === 'Apache-2.0', `license is ${JSON.stringify(m.license)}, expected "Apache-2.0"`);
  expect(m.publishConfig?.access === 'public', 'publishConfig.access must be "public"');
  expect(m.files?.includes('dist') === true, 'files must include "dist"');

  const entry = m.exports?.['.'] as Record<string, unknown> | undefined;
  expect(entry?.['@kvreuse/source'] === './src/index.ts', 'exports["."]["@kvreuse/source"] must be "./src/index.ts"');
  expect(entry?.['types'] === './dist/index.d.ts', 'exports["."].types must be "./dist/index.d.ts"');
  expect(entry?.['default'] === './dist/index.js', 'exports["."].default must be "./dist/index.js"');
  expect(existsSync(join(pkg.path, 'src/index.ts')), 'src/index.ts, the public face, is missing');

  for (const script of ['build', 'typecheck', 'lint', 'test']) {
    expect(typeof m.scripts?.[script] === 'string', `scripts.${script} is missing`);
  }

  const readme = join(pkg.path, 'README.md');
  expect(existsSync(readme) && /```(ts|typescript)\n/.test(readFileSync(readme, 'utf8')),
    'README.md must exist and hold a usage example in a ```ts block');

  const internal: string[] = [];
  for (const field of ['dependencies', 'devDependencies', 'peerDependencies'] as const) {
    for (const [name, range] of Object.entries(m[field] ?? {})) {
      if (name.startsWith('@kvreuse/')) {
        internal.push(name.slice('@kvreuse/'.length));
        expect(range === 'workspace:^', `${field}.${name} must be "workspace:^", is ${JSON.stringify(range)}`);
      } else {
        expect(exactVersion.test(range), `${field}.${name} must pin an exact version, is ${JSON.stringify(range)}`);
      }
    }
  }

  const build = readJson<ProjectConfig>(join(pkg.path, 'tsconfig.build.json'));
  const referenced = (build.references ?? []).map((r) => r.path.replace(/^\.\.\/([^/]+)\/tsconfig\.build\.json$/, '$1')).sort();
  expect(JSON.stringify(referenced) === JSON.stringify([...internal].sort()),
    `tsconfig.build.json references [${referenced.join(', ')}] but the package depends on [${internal.sort().join(', ')}]: tsc -b needs exactly its dependencies`);
  expect(rootReferences.has(`packages/${dir}/tsconfig.build.json`),
    `the root tsconfig.json does not reference packages/${dir}/tsconfig.build.json`);
  return problems;
}

/** What every published package must be: see DEVELOPERS.md and issue 2's "Every package". */
export function checkManifests(repoRoot: string): ManifestProblem[] {
  const root = readJson<ProjectConfig>(join(repoRoot, 'tsconfig.json'));
  const rootReferences = new Set((root.references ?? []).map((r) => r.path));
  return listPackages(repoRoot).flatMap((pkg) =>
    problemsOf(pkg, rootReferences).map((message) => ({ packageDir: pkg.dir, message })),
  );
}
