import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { checkManifests } from './manifests.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('checkManifests', () => {
  it('finds every package of the repository publishable as laid out', () => {
    expect(checkManifests(repoRoot)).toEqual([]);
  });

  it('names the package and the field of each problem', () => {
    const copy = mkdtempSync(join(tmpdir(), 'kvreuse-manifests-'));
    try {
      cpSync(join(repoRoot, 'tsconfig.json'), join(copy, 'tsconfig.json'));
      writeFileSync(join(copy, 'LICENSE'), 'another licence\n');
      cpSync(join(repoRoot, 'packages/config'), join(copy, 'packages/config'), {
        recursive: true,
        filter: (src) => !src.includes('node_modules') && !src.includes('/dist'),
      });
      const manifestPath = join(copy, 'packages/config/package.json');
      const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
      manifest.sideEffects = true;
      manifest.dependencies = { ...manifest.dependencies, zod: '^4.6.0', yaml: '2.9.1', '@kvreuse/descriptors': '*' };
      manifest.devDependencies = {
        ...manifest.devDependencies,
        ajv: '^8.20.0',
        '@kvreuse-internal/test-support': 'workspace:^',
      };
      manifest.peerDependencies = { ...manifest.peerDependencies, '@kvreuse-internal/fixtures': 'workspace:^' };
      manifest.publishConfig = { access: 'public' };
      writeFileSync(manifestPath, JSON.stringify(manifest));
      const messages = checkManifests(copy).map((p) => `${p.packageDir}: ${p.message}`);
      expect(messages).toContain('config: sideEffects must be false');
      expect(messages).toContain(
        'config: zod must be a peerDependency, not a dependency: schemas cross package boundaries, so there must be one copy',
      );
      expect(messages).toContain('config: dependencies.yaml must be a caret range (^x.y.z), is "2.9.1"');
      expect(messages).toContain('config: devDependencies.ajv must be an exact version, is "^8.20.0"');
      expect(messages).toContain(
        'config: publishConfig.exports must be exports without the "@kvreuse/source" condition (what npm users resolve)',
      );
      expect(messages).toContain(
        "config: LICENSE must be a copy of the repository's LICENSE (each package ships its own)",
      );
      expect(messages).toContain('config: dependencies.@kvreuse/descriptors must be "workspace:^", is "*"');
      expect(messages).toContain(
        'config: peerDependencies.@kvreuse-internal/fixtures is a private package of the repository: it may only be a devDependency, as "workspace:^"',
      );
      expect(messages.filter((m) => m.includes('@kvreuse-internal/test-support'))).toEqual([]);
      expect(
        messages.some((m) =>
          m.startsWith(
            'config: tsconfig.build.json references [errors] but the package depends on [descriptors, errors]',
          ),
        ),
      ).toBe(true);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('holds a platform package to its own rules: its platform, the library alone, no install script', () => {
    const copy = mkdtempSync(join(tmpdir(), 'kvreuse-manifests-'));
    try {
      cpSync(join(repoRoot, 'tsconfig.json'), join(copy, 'tsconfig.json'));
      cpSync(join(repoRoot, 'LICENSE'), join(copy, 'LICENSE'));
      const config = JSON.parse(readFileSync(join(repoRoot, '.changeset/config.json'), 'utf8'));
      mkdirSync(join(copy, '.changeset'));
      writeFileSync(join(copy, '.changeset/config.json'), JSON.stringify({ ...config, fixed: [] }));
      for (const dir of ['native-bindings', 'native-linux-arm64-gnu']) {
        cpSync(join(repoRoot, 'packages', dir), join(copy, 'packages', dir), {
          recursive: true,
          filter: (src) => !src.includes('node_modules') && !src.includes('/dist'),
        });
      }
      const edit = (dir: string, change: (manifest: Record<string, any>) => void): void => {
        const manifestPath = join(copy, 'packages', dir, 'package.json');
        const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
        change(manifest);
        writeFileSync(manifestPath, JSON.stringify(manifest));
      };
      edit('native-linux-arm64-gnu', (manifest) => {
        manifest.cpu = ['x64'];
        manifest.files = ['libkvreuse_transport.so', 'src'];
        manifest.scripts.postinstall = 'node build.js';
      });
      edit('native-bindings', (manifest) => {
        manifest.scripts.postinstall = 'kvreuse-build-native';
        manifest.optionalDependencies = {};
      });
      expect(checkManifests(copy).map((p) => `${p.packageDir}: ${p.message}`)).toEqual([
        'native-bindings: scripts.postinstall must be absent: installing a package runs nothing (npm 11 asks users to approve install scripts)',
        'native-linux-arm64-gnu: cpu must be ["arm64"]',
        'native-linux-arm64-gnu: files must be ["libkvreuse_transport.so"], the library alone',
        'native-linux-arm64-gnu: scripts must be "build" and "lint" alone (no install script)',
        'native-linux-arm64-gnu: @kvreuse/native-bindings must list @kvreuse/native-linux-arm64-gnu in optionalDependencies as "workspace:*" (published as its exact version)',
        'native-linux-arm64-gnu: .changeset/config.json must release @kvreuse/native-linux-arm64-gnu with @kvreuse/native-bindings in one "fixed" group (always the same version)',
      ]);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
