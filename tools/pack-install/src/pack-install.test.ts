// Every publishable package as an npm user gets it. Each is packed as a release publishes it (pnpm
// pack), then installed with npm into a blank project outside the workspace (`npm init -y`, ESM)
// together with the tarballs of the @kvreuse packages it depends on, so that nothing comes from the
// workspace or from the public registry's @kvreuse scope; its other dependencies come from the public
// registry. There usage/<package>.ts runs with node, its types stripped, and must print what
// `expectedUsage` says.
//
// Projects: config, descriptors and native-bindings each have a project of their own. The others
// (errors, discovery, inventory, registry and up) share one project that installs every tarball: each of them brings
// etcd3's gRPC stack and better-sqlite3, and a project each would take minutes. A dependency that one
// of those uses but only another declares goes unnoticed there. Types are checked once, in that
// project, for every usage file together (`tsc --noEmit`, strict, the installed declarations checked
// too, skipLibCheck off): one run takes 30 s or more here, one per package would take minutes. That project denies better-sqlite3's
// install script (`allowScripts`), as a user may: where its prebuilt binary cannot be downloaded (here
// nothing but the npm registry is reachable) it compiles SQLite, about four minutes on two cores. The
// scripts use the memory discovery store; the SQLite store has its own tests in the registry package.
//
// @kvreuse/native-bindings runs nothing at install. Its project installs it as a user of Linux on x64 or
// arm64 does: with the platform package of this machine's cpu (the prebuilt library, an optional
// dependency, its tarball given here as the others are), with `npm install --ignore-scripts` and no C
// compiler or make on PATH, and its script moves bytes over loopback with that library. The shared
// project installs no platform package and builds the library from the shipped C sources with
// `npx kvreuse-build-native`, as users of other platforms do (its README). All installs share one npm
// cache, kept in this package's node_modules between runs.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openVethPair, vethPairsUnavailable } from '@kvreuse-internal/test-support';
import { BlankProject } from './blank-project.js';
import {
  benchLinkAcross,
  benchLinkIterations,
  benchLinkPort,
  type BenchLinkReport,
  benchLinkSizes,
} from './bench-link.js';
import { packPackages, platformPackage, publishablePackages, type PublishablePackage } from './packed-packages.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const usageDir = fileURLToPath(new URL('../usage', import.meta.url));
const npmCache = fileURLToPath(new URL('../node_modules/.cache/pack-install-npm', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'kvreuse-pack-install-'));
const packages = publishablePackages(repoRoot);
const prebuilt = platformPackage(repoRoot);
const installedAlone = ['config', 'descriptors', 'native-bindings'];
const sharedProjectPackages = packages.filter((pkg) => !installedAlone.includes(pkg.dir));
let tarballs = new Map<string, string>();

const installTimeout = 600_000;
/** Why `kvreuse bench link` cannot be tried between two network namespaces here, if it cannot. */
const namespacesUnavailable = vethPairsUnavailable();
const stepTimeout = 120_000;

beforeAll(() => {
  tarballs = packPackages(repoRoot, [...packages, prebuilt], join(work, 'tarballs'));
}, installTimeout);
afterAll(() => rmSync(work, { recursive: true, force: true }), stepTimeout);

function tarballOf(name: string): string {
  const tarball = tarballs.get(name);
  if (tarball === undefined) throw new Error(`${name} was not packed: it is not a publishable package of packages/`);
  return tarball;
}

/** The @kvreuse packages the project holds, each with the tarball it came from. */
function kvreuseSources(project: BlankProject): Record<string, string | undefined> {
  return Object.fromEntries(
    project
      .locked('node_modules/@kvreuse/')
      .map(({ location, resolved }) => [
        location.slice('node_modules/'.length),
        resolved?.startsWith('file:') === true ? resolve(project.dir, resolved.slice('file:'.length)) : resolved,
      ]),
  );
}

/** The last line a usage script printed, as JSON. */
function runUsage(project: BlankProject, pkg: PublishablePackage): unknown {
  const lines = project
    .run(join(usageDir, `${pkg.dir}.ts`))
    .trim()
    .split('\n');
  return JSON.parse(lines[lines.length - 1] ?? '');
}

function buildNativeLibrary(project: BlankProject): void {
  project.npx('kvreuse-build-native', ['-j2']);
}

/** Usage checks, by package folder: what running usage/<dir>.ts must print. */
const expectedUsage: Record<string, (printed: unknown, project: BlankProject) => void> = {
  config: (printed) => expect(printed).toEqual({ backend: ['memory', 'env'], flushIntervalMs: [250, 'argv'] }),
  descriptors: (printed) =>
    // Two Qwen3-0.6B blocks (7,340,032 bytes each) from a TP 1 worker to another: one rank pair, and one
    // descriptor per block and (layer, plane) bank, the source blocks being too far apart to merge.
    expect(printed).toEqual({ pairs: 1, descriptors: 2 * 28 * 2, totalBytes: String(2 * 7_340_032) }),
  errors: (printed) =>
    expect(printed).toEqual({
      code: 'QUOTA_EXCEEDED',
      isKvreuseError: true,
      plainError: false,
      message: 'quota exceeded by 3n blocks',
    }),
  // Not ready before the part is published, ready once it is, not ready again once it is withdrawn.
  discovery: (printed) =>
    expect(printed).toEqual({
      published: ['kvreuse/workers/decode-0/incarnations/decode-0-a/pp0-tp0'],
      seen: ['not ready', 'ready', 'not ready'],
    }),
  inventory: (printed) =>
    expect(printed).toEqual({ blocks: 5, workerId: 'decode-0', retained: 4, gpuBlocks: 3, hostBlocks: 1 }),
  'engine-events': (printed) =>
    expect(printed).toEqual({
      type: 'BlockRemoved',
      hash: '18446744073709551615',
      rank: 0,
      vllmHash: '10703402261835016479',
    }),
  'native-bindings': (printed, project) =>
    expect(printed).toEqual({
      libraryPath: join(project.dir, 'node_modules', prebuilt.name, 'libkvreuse_transport.so'),
      backends: expect.arrayContaining(['loopback']),
      read: { bytesDone: 1 << 20, sevens: 1 << 20 },
      forced: null,
    }),
  registry: (printed) =>
    expect(printed).toEqual({
      banks: 56,
      registered: 56,
      published: ['kvreuse/workers/decode-0/incarnations/decode-0-a/pp0-tp0'],
      states: ['returned'],
    }),
  drain: (printed) => expect(printed).toMatchObject({ completed: 0, banksReturned: 0 }),
  'profile-admission': (printed) => {
    const { names, loaded } = printed as { names: string[]; loaded: string[] };
    expect(names.length).toBeGreaterThan(0);
    expect(loaded).toEqual(names);
  },
  router: (printed) =>
    expect(printed).toMatchObject({ savingMs: (42 * 64 * 80) / 1000, prefillEstimate: 'prior', estimate: 'prior' }),
  endpoint: (printed) =>
    expect(printed).toEqual({
      kind: 'grant',
      pinId: 'request-1',
      grantId: 'grant-1',
      sourceBlocks: [17, 18, 40],
      leaseMs: 5_000,
    }),
  cli: (printed) => expect(printed).toEqual({ status: 0, discoveryBackend: ['memory', 'argv'] }),
};

it('has a usage script and its expectation for every publishable package, and only for them', () => {
  const dirs = packages.map((pkg) => pkg.dir).sort();
  expect(
    readdirSync(usageDir)
      .filter((file) => file.endsWith('.ts'))
      .map((file) => file.slice(0, -'.ts'.length))
      .sort(),
  ).toEqual(dirs);
  expect(Object.keys(expectedUsage).sort()).toEqual(dirs);
});

/** Runs usage/<dir>.ts of one package in a project that installed it. */
function usedFromItsInstall(pkg: PublishablePackage, project: () => BlankProject): void {
  it(
    `${pkg.name}: its public entry does what usage/${pkg.dir}.ts asks`,
    () => {
      expectedUsage[pkg.dir]?.(runUsage(project(), pkg), project());
    },
    stepTimeout,
  );
}

for (const dir of installedAlone) {
  const pkg = packages.find((candidate) => candidate.dir === dir);
  if (pkg === undefined) throw new Error(`packages/${dir} is not a publishable package`);

  // native-bindings: with its platform package, no install script run and no compiler to run one with.
  const native = dir === 'native-bindings';
  const installed = [pkg.name, ...pkg.kvreuseDependencies, ...(native ? [prebuilt.name] : [])];
  describe(`${pkg.name}, installed alone`, () => {
    let project: BlankProject;
    beforeAll(() => {
      project = new BlankProject(
        join(work, dir),
        native ? { npmCache, ignoreScripts: true, commands: ['node', 'npm', 'npx'] } : { npmCache },
      );
      project.install(installed.map(tarballOf));
    }, installTimeout);

    it('holds exactly its own tarball and those of the @kvreuse packages it depends on', () => {
      expect(kvreuseSources(project)).toEqual(Object.fromEntries(installed.map((name) => [name, tarballOf(name)])));
    });

    if (native) {
      it('was installed with no C compiler or make on PATH, and built nothing', () => {
        expect(readdirSync(project.path ?? '').sort()).toEqual(['node', 'npm', 'npx']);
        expect(existsSync(join(project.dir, 'node_modules/@kvreuse/native-bindings/native/build'))).toBe(false);
      });
    }

    usedFromItsInstall(pkg, () => project);
  });
}

describe('the packages above native-bindings, installed together', () => {
  let project: BlankProject;
  beforeAll(() => {
    project = new BlankProject(join(work, 'shared'), { npmCache, deniedInstallScripts: ['better-sqlite3'] });
    project.install(packages.map((pkg) => tarballOf(pkg.name)));
    buildNativeLibrary(project);
  }, installTimeout);

  it('holds every package from its tarball', () => {
    expect(kvreuseSources(project)).toEqual(Object.fromEntries(packages.map((pkg) => [pkg.name, tarballOf(pkg.name)])));
  });

  it(
    "a strict TypeScript user's code type-checks against every package's declarations",
    () => {
      project.typecheck(packages.map((pkg) => join(usageDir, `${pkg.dir}.ts`)));
    },
    stepTimeout,
  );

  for (const pkg of sharedProjectPackages) usedFromItsInstall(pkg, () => project);

  it.skipIf(namespacesUnavailable !== undefined)(
    `@kvreuse/cli: \`kvreuse bench link\` measures the link between two network namespaces over UCX's tcp${namespacesUnavailable === undefined ? '' : ` (SKIPPED: ${namespacesUnavailable})`}`,
    async () => {
      const pair = openVethPair();
      try {
        const { listened, measured } = await benchLinkAcross(pair, join(project.dir, 'node_modules/.bin/kvreuse'));
        expect(listened).toMatchObject({ status: 0, stdout: '' });
        expect(measured).toMatchObject({ status: 0, stderr: '' });
        const report = JSON.parse(measured.stdout) as BenchLinkReport;
        expect(report).toMatchObject({
          peer: `${pair.a.address}:${benchLinkPort}`,
          lanes: [`tcp/${pair.device}.0`],
          verified: true,
        });
        expect(report.results.map(({ direction, bytes, iterations }) => [direction, bytes, iterations])).toEqual(
          ['read', 'write'].flatMap((direction) =>
            benchLinkSizes.map((bytes) => [direction, bytes, benchLinkIterations]),
          ),
        );
        for (const row of report.results) expect(row.bytesPerSecond).toBeGreaterThan(0);
      } finally {
        pair.close();
      }
    },
    stepTimeout,
  );

  it(
    '@kvreuse/cli: `npx kvreuse --help` lists its commands',
    () => {
      const help = project.npx('kvreuse', ['--help']);
      expect(help).toMatch(/^usage: kvreuse <command>/);
      expect(help).toContain('config show');
      expect(help).toContain('demo');
    },
    stepTimeout,
  );
});
