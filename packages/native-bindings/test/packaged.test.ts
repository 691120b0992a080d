import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'kvreuse-native-bindings-pack-'));

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the packed package', () => {
  it('builds the library from the C sources it ships and loads it from its own native/build', () => {
    execFileSync('npm', ['pack', '--pack-destination', work], { cwd: packageDir, stdio: 'ignore' });
    const tarball = readdirSync(work).find((name) => name.endsWith('.tgz'));
    if (tarball === undefined) throw new Error(`npm pack wrote no tarball into ${work}`);
    execFileSync('tar', ['-xzf', join(work, tarball), '-C', work]);
    const installed = join(work, 'package');
    // What an installation provides besides the package itself: its dependency koffi.
    symlinkSync(join(packageDir, 'node_modules'), join(installed, 'node_modules'));

    execFileSync(process.execPath, [join(installed, 'bin/build-native.mjs'), '-j2'], { stdio: 'ignore' });
    const report = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { loadTransport } = await import(${JSON.stringify(join(installed, 'dist/index.js'))});
         const transport = loadTransport();
         const agent = await transport.createAgent({ name: 'packaged', backend: 'loopback' });
         await agent.close();
         console.log(JSON.stringify({ path: transport.libraryPath, backends: transport.capabilities().backends }));`,
      ],
      { encoding: 'utf8' },
    );
    const loaded = JSON.parse(report) as { path: string; backends: string[] };
    expect(loaded.path).toBe(join(installed, 'native/build/libkvreuse_transport.so'));
    expect(loaded.backends).toContain('loopback');
  }, 300_000);
});
