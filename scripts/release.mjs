#!/usr/bin/env node
// Publishes the packages whose versions `changeset version` raised, from a clean checkout: installs from
// the frozen lockfile, builds every package (dist/ is not in git; the platform packages'
// libkvreuse_transport.so, arm64 with gcc-aarch64-linux-gnu), checks what would be published, then
// `changeset publish` with npm provenance. Needs NPM_TOKEN (or an npm login) and, for provenance, a CI
// that issues OIDC tokens (see .github/workflows/release.yml).
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dryRun = process.argv.includes('--dry-run');
const env = {
  ...process.env,
  NPM_CONFIG_PROVENANCE: process.env.NPM_CONFIG_PROVENANCE ?? 'true',
  TURBO_TELEMETRY_DISABLED: '1',
};

function run(command, args) {
  console.log(`release: ${[command, ...args].join(' ')}`);
  const result = spawnSync(command, args, { stdio: 'inherit', cwd: root, env });
  if (result.status !== 0) {
    console.error(
      `release: ${command} ${args.join(' ')} failed (${result.status ?? result.signal}); nothing was published after this step`,
    );
    process.exit(1);
  }
}

run('pnpm', ['install', '--frozen-lockfile']);
run('pnpm', ['exec', 'turbo', 'run', 'build', 'lint', '--filter=./packages/*']);
if (dryRun)
  run('pnpm', [
    '-r',
    '--filter=./packages/*',
    'exec',
    'pnpm',
    'pack',
    '--pack-destination',
    join(root, '.release-dry-run'),
  ]);
else run('pnpm', ['exec', 'changeset', 'publish']);
