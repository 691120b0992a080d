// prepack: copies the C library's sources (Makefile, include/, src/) from the repository's native/
// into this package's native/, so the published package can build the library (kvreuse-build-native).
// Leaves an identical copy untouched, so that two packs at once (lint and tests) do not race.
import { cpSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const from = fileURLToPath(new URL('../../../native/', import.meta.url));
const to = fileURLToPath(new URL('../native/', import.meta.url));
const directories = ['include', 'src'];
const entries = ['Makefile', ...directories];

/** The files of a sources tree, relative to it, sorted. */
function files(root) {
  return directories
    .flatMap((directory) =>
      existsSync(join(root, directory))
        ? readdirSync(join(root, directory), { recursive: true, withFileTypes: true })
        : [],
    )
    .filter((dirent) => dirent.isFile())
    .map((dirent) => join(dirent.parentPath, dirent.name).slice(root.length))
    .concat(existsSync(join(root, 'Makefile')) ? ['Makefile'] : [])
    .sort();
}

if (!existsSync(join(from, 'Makefile'))) {
  console.error(`copy-native-sources: no native library sources at ${from}`);
  process.exit(1);
}
const wanted = files(from);
const present = files(to);
const same =
  wanted.length === present.length &&
  wanted.every((file, i) => file === present[i] && readFileSync(join(from, file)).equals(readFileSync(join(to, file))));
if (!same) {
  rmSync(to, { recursive: true, force: true });
  for (const entry of entries) cpSync(join(from, entry), join(to, entry), { recursive: true });
}
