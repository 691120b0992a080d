// prepack: copies the C library's sources (Makefile, include/, src/) from the repository's native/
// into this package's native/, so the published package can build the library (kvreuse-build-native).
import { cpSync, existsSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const from = fileURLToPath(new URL('../../../native/', import.meta.url));
const to = fileURLToPath(new URL('../native/', import.meta.url));
if (!existsSync(`${from}Makefile`)) {
  console.error(`copy-native-sources: no native library sources at ${from}`);
  process.exit(1);
}
rmSync(to, { recursive: true, force: true });
for (const entry of ['Makefile', 'include', 'src']) cpSync(`${from}${entry}`, `${to}${entry}`, { recursive: true });
