import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DiscoveryDriverMissingError } from '../src/index.js';
import { loadDriver } from '../src/drivers.js';

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Runs `body` in a new Node process that imported @kvreuse/discovery; returns the CommonJS modules it then held, by package. */
function packagesLoadedAfter(body: string): string[] {
  const program = `
    import { createRequire } from 'node:module';
    import * as discovery from '@kvreuse/discovery';
    ${body}
    const packages = new Set(Object.keys(createRequire(import.meta.url).cache).map((path) => /node_modules\\/((@[^/]+\\/)?[^/]+)\\/(?!.*node_modules)/.exec(path)?.[1]).filter(Boolean));
    console.log(JSON.stringify([...packages].sort()));
  `;
  const output = execFileSync(
    process.execPath,
    ['--conditions=@kvreuse/source', '--import', 'tsx', '--input-type=module', '-e', program],
    {
      cwd: packageRoot,
      encoding: 'utf8',
    },
  );
  return JSON.parse(output.trim().split('\n').at(-1) ?? '[]') as string[];
}

describe('the etcd client library', () => {
  it('is not loaded by importing the package, only by making an etcd store', () => {
    const onImport = packagesLoadedAfter('void discovery;');
    expect(onImport).not.toContain('etcd3');
    expect(onImport).not.toContain('@grpc/grpc-js');
    expect(onImport).not.toContain('cockatiel');
    const onConnect = packagesLoadedAfter(
      "await discovery.connectEtcdDiscovery({ hosts: 'http://127.0.0.1:9' }).close();",
    );
    expect(onConnect).toContain('etcd3');
    expect(onConnect).toContain('@grpc/grpc-js');
    expect(onConnect).toContain('cockatiel');
  });
});

describe('the SQLite driver', () => {
  it('is not loaded by importing the package, only by opening a SQLite store', () => {
    expect(packagesLoadedAfter('void discovery;')).not.toContain('better-sqlite3');
    const onOpen = packagesLoadedAfter(
      "const dir = (await import('node:fs')).mkdtempSync((await import('node:path')).join((await import('node:os')).tmpdir(), 'kvreuse-driver-'));" +
        " await discovery.openSqliteDiscovery(dir + '/d.sqlite').close(); (await import('node:fs')).rmSync(dir, { recursive: true });",
    );
    expect(onOpen).toContain('better-sqlite3');
  });
});

describe('a driver that is not installed', () => {
  it('is refused with DiscoveryDriverMissingError naming the package to install', () => {
    const missing = (() => {
      try {
        loadDriver('sqlite', 'kvreuse-driver-that-is-not-installed');
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(missing).toBeInstanceOf(DiscoveryDriverMissingError);
    expect(missing).toMatchObject({
      code: 'DISCOVERY_DRIVER_MISSING',
      backend: 'sqlite',
      driver: 'kvreuse-driver-that-is-not-installed',
    });
    expect((missing as Error).message).toBe(
      'sqlite discovery needs the package kvreuse-driver-that-is-not-installed, which is not installed: install it next to @kvreuse/discovery (npm install kvreuse-driver-that-is-not-installed)',
    );
  });
});
