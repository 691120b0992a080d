import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { type Bump, bumped, checkChangesets, fixedGroups, readChangesets } from './changesets.js';
import { listPackages } from './workspace.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const changesetBin = join(repoRoot, 'node_modules/@changesets/cli/bin.js');
const scratchDirs: string[] = [];
afterAll(() => scratchDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A copy of what `changeset version` reads and writes: the workspace's manifests and changelogs, and the pending changesets. */
function scratchCopy(): string {
  const copy = mkdtempSync(join(tmpdir(), 'kvreuse-changesets-'));
  scratchDirs.push(copy);
  for (const file of ['package.json', 'pnpm-workspace.yaml']) cpSync(join(repoRoot, file), join(copy, file));
  cpSync(join(repoRoot, '.changeset'), join(copy, '.changeset'), { recursive: true });
  for (const group of ['packages', 'tools']) {
    for (const dir of readdirSync(join(repoRoot, group))) {
      const manifest = join(repoRoot, group, dir, 'package.json');
      if (!existsSync(manifest)) continue;
      mkdirSync(join(copy, group, dir), { recursive: true });
      cpSync(manifest, join(copy, group, dir, 'package.json'));
      const changelog = join(repoRoot, group, dir, 'CHANGELOG.md');
      if (existsSync(changelog)) cpSync(changelog, join(copy, group, dir, 'CHANGELOG.md'));
    }
  }
  return copy;
}

function version(copy: string): void {
  const result = spawnSync(process.execPath, [changesetBin, 'version'], { cwd: copy, encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
}

function manifestOf(copy: string, dir: string): { version: string; dependencies?: Record<string, string> } {
  return JSON.parse(readFileSync(join(copy, 'packages', dir, 'package.json'), 'utf8'));
}

/** The packages that list `name` in their dependencies or peer dependencies: its direct dependents at run time. */
function dependentsOf(name: string, packages: ReturnType<typeof listPackages>): Set<string> {
  const runtime = (manifest: (typeof packages)[number]['manifest']) => ({
    ...manifest.dependencies,
    ...manifest.peerDependencies,
  });
  return new Set(
    packages.flatMap(({ manifest }) =>
      manifest.name !== undefined && name in runtime(manifest) ? [manifest.name] : [],
    ),
  );
}

/** Whether version `a` is at or above version `b` (x.y.z). */
function newer(a: string, b: string): boolean {
  const [x, y] = [a, b].map((version) => version.split('.').map(Number));
  const at = (parts: number[] | undefined, i: number) => parts?.[i] ?? 0;
  for (let i = 0; i < 3; i++) if (at(x, i) !== at(y, i)) return at(x, i) > at(y, i);
  return true;
}

/** Whether `candidate` satisfies `^base`: the same major, or at 0.x the same minor, or at 0.0.x the same patch. */
function inCaretRange(base: string, candidate: string): boolean {
  const [b, c] = [base, candidate].map((version) => version.split('.').map(Number));
  const leading = (b ?? []).findIndex((part) => part !== 0);
  const fixedParts = leading === -1 ? 3 : leading + 1;
  for (let i = 0; i < fixedParts; i++) if ((b ?? [])[i] !== (c ?? [])[i]) return false;
  return newer(candidate, base);
}

/** The packages released with `name` at one version (its `fixed` group), `name` included. */
function releasedWith(name: string): string[] {
  return fixedGroups(repoRoot).find((group) => group.includes(name)) ?? [name];
}

/**
 * What `changeset version` releases, by package name, given the bumps its changesets ask for (`own`) and
 * the versions before: each package at its own bump, a fixed group as one (its highest version, with the
 * largest bump of any of its packages), and with `updateInternalDependencies: "patch"` a patch for each
 * direct dependent of a package whose new version leaves the caret range of the one before. A dependent
 * released so whose patch stays in its own dependents' range releases nothing further: a package that
 * depends on a change only through another (indirectly) moves only when such a range is left on the way.
 * `dependents` are the packages released for a dependency alone.
 */
function releases(
  own: ReadonlyMap<string, Bump[]>,
  before: ReadonlyMap<string, string>,
  packages: ReturnType<typeof listPackages>,
) {
  const bumps = new Map([...before.keys()].map((pkg) => [pkg, [...(own.get(pkg) ?? [])]]));
  const dependents = new Set<string>();
  const versionOf = (pkg: string): string => {
    const group = releasedWith(pkg);
    const groupVersion = group.map((name) => before.get(name) ?? '0.0.0').reduce((a, b) => (newer(a, b) ? a : b));
    return bumped(
      group.length > 1 ? groupVersion : (before.get(pkg) ?? '0.0.0'),
      group.flatMap((name) => bumps.get(name) ?? []),
    );
  };
  for (let changed = true; changed;) {
    changed = false;
    for (const [pkg, version] of before) {
      if (inCaretRange(version, versionOf(pkg))) continue;
      for (const dependent of dependentsOf(pkg, packages)) {
        if ((bumps.get(dependent) ?? []).length > 0) continue;
        bumps.set(dependent, ['patch']);
        dependents.add(dependent);
        changed = true;
      }
    }
  }
  return { versions: new Map([...before.keys()].map((pkg) => [pkg, versionOf(pkg)])), dependents };
}

describe('changesets', () => {
  it('every pending changeset names real packages with a known bump and speaks to users', () => {
    expect(checkChangesets(repoRoot)).toEqual([]);
  });

  it('names each problem with its file', () => {
    const copy = scratchCopy();
    mkdirSync(join(copy, 'packages/config'), { recursive: true });
    writeFileSync(
      join(copy, '.changeset/bad.md'),
      "---\n'@kvreuse/nope': minor\n'@kvreuse/config': huge\n---\n\nReview: the test is faster.\n",
    );
    writeFileSync(join(copy, '.changeset/bare.md'), 'no frontmatter\n');
    const problems = checkChangesets(copy).map(({ file, message }) => `${file}: ${message}`);
    expect(problems).toEqual([
      'bad.md: names @kvreuse/nope, which is not a package of the repository',
      'bad.md: gives @kvreuse/config the bump "huge" (major, minor or patch)',
      'bad.md: reads like a review note ("Review"): say what changed for the package\'s users',
      'bare.md: has no frontmatter naming the packages and their bumps',
    ]);
  });

  it('changeset version turns a stacked series into the right versions and changelogs, round after round', () => {
    const copy = scratchCopy();
    const pending = readChangesets(repoRoot);
    const packages = listPackages(repoRoot);
    const own = (name: string) =>
      pending.flatMap((changeset) => changeset.releases.filter((r) => r.name === name).map((r) => r.bump as Bump));
    const nameOf = ({ dir, manifest }: (typeof packages)[number]): string => manifest.name ?? dir;
    const expected = releases(
      new Map(packages.map((pkg) => [nameOf(pkg), own(nameOf(pkg))])),
      new Map(packages.map((pkg) => [nameOf(pkg), pkg.manifest.version ?? '0.0.0'])),
      packages,
    );

    version(copy);
    const firstRound = new Map<string, string>();
    for (const { dir, manifest } of packages) {
      const bumps = own(manifest.name ?? dir);
      const after = manifestOf(copy, dir);
      expect(after.version, manifest.name).toBe(expected.versions.get(manifest.name ?? dir));
      firstRound.set(dir, after.version);
      // Inside the repository, packages keep depending on each other through the workspace.
      for (const [name, range] of Object.entries(after.dependencies ?? {}))
        if (name.startsWith('@kvreuse/')) expect(range, `${manifest.name} → ${name}`).toBe('workspace:^');
      if (bumps.length > 0) {
        const changelog = readFileSync(join(copy, 'packages', dir, 'CHANGELOG.md'), 'utf8');
        expect(changelog.startsWith(`# ${manifest.name}\n\n## ${after.version}\n`)).toBe(true);
        for (const changeset of pending.filter((c) => c.releases.some((r) => r.name === manifest.name))) {
          expect(changelog, `${changeset.file} in ${manifest.name}'s changelog`).toContain(
            (changeset.summary.split('\n')[0] ?? '').trim(),
          );
        }
      }
    }
    expect(readdirSync(join(copy, '.changeset')).sort()).toEqual(['README.md', 'config.json']);

    // The next change of the series: a patch to the descriptors, on top of the released versions.
    writeFileSync(
      join(copy, '.changeset/next.md'),
      "---\n'@kvreuse/descriptors': patch\n---\n\nA fix users can read about.\n",
    );
    version(copy);
    expect(manifestOf(copy, 'descriptors').version).toBe(bumped(firstRound.get('descriptors') ?? '', ['patch']));
    expect(manifestOf(copy, 'config').version).toBe(firstRound.get('config'));
    const changelog = readFileSync(join(copy, 'packages/descriptors/CHANGELOG.md'), 'utf8');
    expect(changelog.indexOf('A fix users can read about.')).toBeLessThan(
      changelog.indexOf(`## ${firstRound.get('descriptors')}`),
    );
  }, 120_000); // two `changeset version` runs, several seconds each on a loaded machine

  it('changeset version releases the dependents of each change of a series that leaves their range with a patch, and says which dependency moved', () => {
    const copy = scratchCopy();
    for (const { file } of readChangesets(repoRoot)) rmSync(join(copy, '.changeset', file));
    const packages = listPackages(repoRoot);
    const versions = new Map(
      packages.map(({ dir, manifest }) => [manifest.name ?? dir, { dir, version: manifest.version ?? '0.0.0' }]),
    );
    // A fix low in the stack, a feature in the middle, then a fix at the bottom, released one at a time.
    const series: { name: string; bump: Bump; summary: string }[] = [
      { name: '@kvreuse/descriptors', bump: 'patch', summary: 'Shards of one KV head are refused with the reason.' },
      { name: '@kvreuse/registry', bump: 'minor', summary: 'Readiness names the bank a gate refused.' },
      { name: '@kvreuse/config', bump: 'patch', summary: 'A misspelt flag names the closest one.' },
    ];

    series.forEach(({ name, bump, summary }, round) => {
      writeFileSync(join(copy, `.changeset/change-${round}.md`), `---\n'${name}': ${bump}\n---\n\n${summary}\n`);
      version(copy);
      expect(dependentsOf(name, packages).size, `${name} has dependents`).toBeGreaterThan(0);
      const before = new Map([...versions].map(([pkg, { version }]) => [pkg, version]));
      const { versions: next, dependents } = releases(new Map([[name, [bump]]]), before, packages);
      for (const [pkg, entry] of versions) entry.version = next.get(pkg) ?? entry.version;
      for (const [pkg, entry] of versions) {
        const after = manifestOf(copy, entry.dir);
        expect(after.version, `${pkg} after ${name} ${bump}`).toBe(entry.version);
        // The range stays the workspace protocol in the repository; publishing turns it into ^version.
        for (const [dependency, range] of Object.entries(after.dependencies ?? {})) {
          if (dependency.startsWith('@kvreuse/')) expect(range, `${pkg} → ${dependency}`).toBe('workspace:^');
        }
        if (entry.version === before.get(pkg)) continue;
        const changelog = readFileSync(join(copy, 'packages', entry.dir, 'CHANGELOG.md'), 'utf8');
        const newest = changelog.slice(0, changelog.indexOf(`\n## ${before.get(pkg)}\n`) >>> 0);
        expect(
          newest.startsWith(`# ${pkg}\n\n## ${entry.version}\n`),
          `${pkg}'s changelog opens with ${entry.version}`,
        ).toBe(true);
        if (pkg === name)
          expect(newest).toContain(`### ${bump === 'minor' ? 'Minor' : 'Patch'} Changes\n\n- ${summary}\n`);
        else if (dependents.has(pkg)) expect(newest).toContain('### Patch Changes\n\n- Updated dependencies\n');
        // Every internal dependency released in this round is named with its new version.
        for (const dependency of [name, ...dependents]) {
          if (dependency === pkg || !(dependency in { ...manifestOf(copy, entry.dir).dependencies })) continue;
          expect(newest, `${pkg}'s changelog names ${dependency}`).toContain(
            `  - ${dependency}@${versions.get(dependency)?.version}\n`,
          );
        }
      }
    });
    // Each round's entry sits above the one before it.
    const registryLog = readFileSync(join(copy, 'packages/registry/CHANGELOG.md'), 'utf8');
    const registryFirst =
      packages.find(({ manifest }) => manifest.name === '@kvreuse/registry')?.manifest.version ?? '0.0.0';
    expect(registryLog.indexOf(`## ${versions.get('@kvreuse/registry')?.version}`)).toBeLessThan(
      registryLog.indexOf(`## ${registryFirst}\n`),
    );
  }, 60_000); // three `changeset version` runs, about two seconds each
});
