#!/usr/bin/env node
// Builds libkvreuse_transport from the C sources shipped in this package (native/) into native/build/,
// where loadTransport() looks for it by default. Needs a C compiler and make; the UCX backend is built
// when UCX headers are installed (Debian: apt-get install libucx-dev). Extra arguments go to make,
// e.g. `kvreuse-build-native UCX_PREFIX=/opt/ucx`.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const nativeDir = fileURLToPath(new URL('../native', import.meta.url));
const result = spawnSync('make', ['-C', nativeDir, ...process.argv.slice(2)], { stdio: 'inherit' });
if (result.error) {
  console.error(`kvreuse-build-native: could not run make: ${result.error.message}`);
  process.exit(1);
}
process.exit(result.status ?? 1);
