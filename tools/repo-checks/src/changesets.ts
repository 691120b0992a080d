// The pending changesets are what the changelogs will say: each names packages that exist with a bump
// changesets knows, and speaks to the packages' users, not to the reviewers of the change.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { listPackages } from './workspace.js';

export type Bump = 'major' | 'minor' | 'patch';

export interface Changeset {
  file: string;
  releases: { name: string; bump: string }[];
  summary: string;
}

export interface ChangesetProblem {
  file: string;
  message: string;
}

const frontmatter = /^---\n([\s\S]*?)\n---\n([\s\S]*)$/;
const release = /^\s*["']?([^"':]+)["']?\s*:\s*(\S+)\s*$/;
// Words of a review or a work log, which a changelog reader has no use for.
const reviewWords = /\b(review(ed|er)?|issue \d+|session|helper|the lead|TODO)\b/i;

export function readChangesets(repoRoot: string): Changeset[] {
  const dir = join(repoRoot, '.changeset');
  return readdirSync(dir)
    .filter((file) => file.endsWith('.md') && file !== 'README.md')
    .sort()
    .map((file) => {
      const text = readFileSync(join(dir, file), 'utf8');
      const match = frontmatter.exec(text);
      if (match === null) return { file, releases: [], summary: text };
      const releases = (match[1] ?? '')
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => {
          const parts = release.exec(line);
          return { name: parts?.[1] ?? line, bump: parts?.[2]?.replace(/["']/g, '') ?? '' };
        });
      return { file, releases, summary: (match[2] ?? '').trim() };
    });
}

export function checkChangesets(repoRoot: string): ChangesetProblem[] {
  const packages = new Set(listPackages(repoRoot).map((pkg) => pkg.manifest.name));
  return readChangesets(repoRoot).flatMap(({ file, releases, summary }) => {
    const problems: string[] = [];
    if (releases.length === 0) problems.push('has no frontmatter naming the packages and their bumps');
    for (const { name, bump } of releases) {
      if (!packages.has(name)) problems.push(`names ${name}, which is not a package of the repository`);
      if (!['major', 'minor', 'patch'].includes(bump))
        problems.push(`gives ${name} the bump ${JSON.stringify(bump)} (major, minor or patch)`);
    }
    if (summary === '') problems.push('says nothing: the changelog entry is empty');
    const review = reviewWords.exec(summary);
    if (review !== null)
      problems.push(`reads like a review note ("${review[0]}"): say what changed for the package's users`);
    return problems.map((message) => ({ file, message }));
  });
}

/** The groups of packages that `changeset version` always releases together at one version (`fixed`). */
export function fixedGroups(repoRoot: string): string[][] {
  const path = join(repoRoot, '.changeset/config.json');
  if (!existsSync(path)) return [];
  const config = JSON.parse(readFileSync(path, 'utf8')) as { fixed?: string[][] };
  return config.fixed ?? [];
}

const order: Record<Bump, number> = { patch: 0, minor: 1, major: 2 };

/** The version `changeset version` gives a package at `version` for the bumps named: the largest bump wins. */
export function bumped(version: string, bumps: readonly Bump[]): string {
  if (bumps.length === 0) return version;
  const [major = 0, minor = 0, patch = 0] = version.split('.').map(Number);
  const bump = bumps.reduce((a, b) => (order[b] > order[a] ? b : a));
  if (bump === 'major') return `${major + 1}.0.0`;
  if (bump === 'minor') return `${major}.${minor + 1}.0`;
  return `${major}.${minor}.${patch + 1}`;
}
