import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/** A directory for settings files that the test file removes when it is done; `write` returns the path. */
export function temporaryDirectory(prefix: string): {
  readonly path: string;
  readonly write: (name: string, text: string) => string;
} {
  const path = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(path, { recursive: true, force: true }));
  return {
    path,
    write: (name, text) => {
      const file = join(path, name);
      writeFileSync(file, text);
      return file;
    },
  };
}
