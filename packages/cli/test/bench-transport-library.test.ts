import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { loadTransport } from '@kvreuse/native-bindings';
import { afterAll, expect, it } from 'vitest';
import { runInProcess } from './binary.js';

// A checkout whose `scripts/dev.mjs` only records the library its benchmarks would load.
const checkout = mkdtempSync(join(tmpdir(), 'kvreuse-cli-bench-checkout-'));
afterAll(() => rmSync(checkout, { recursive: true, force: true }));
writeFileSync(join(checkout, 'package.json'), JSON.stringify({ name: 'kvreuse-monorepo' }));
mkdirSync(join(checkout, 'scripts'));
const recorded = join(checkout, 'library.txt');
writeFileSync(
  join(checkout, 'scripts', 'dev.mjs'),
  `import { writeFileSync } from 'node:fs';\n` +
    `writeFileSync(${JSON.stringify(recorded)}, process.env.KVREUSE_TRANSPORT_LIBRARY ?? 'unset');\n`,
);
const cwd = join(checkout, 'packages');
mkdirSync(cwd);

it('hands --transport-library, taken from its working directory, to the benchmarks it runs', async () => {
  const { libraryPath } = loadTransport().capabilities();
  const run = await runInProcess(['bench', '--transport-library', relative(cwd, libraryPath)], { cwd });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  expect(readFileSync(recorded, 'utf8')).toBe(libraryPath);
  const dryRun = await runInProcess(['bench', '--dry-run', '--transport-library', libraryPath], { cwd });
  expect(dryRun.stdout).toBe(
    `in ${checkout}: KVREUSE_TRANSPORT_LIBRARY=${libraryPath} ${process.execPath} ${join(checkout, 'scripts', 'dev.mjs')} bench\n`,
  );
});
