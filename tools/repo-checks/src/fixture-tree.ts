import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * A tree of files in a fresh temporary folder, for a check to run over: each path, relative to the
 * folder, with its text (an object is written as JSON). `remove` deletes the folder.
 */
export function writeTree(
  files: Record<string, string | object>,
  prefix = 'kvreuse-repo-checks-',
): { root: string; remove: () => void } {
  const root = mkdtempSync(join(tmpdir(), prefix));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), typeof content === 'string' ? content : JSON.stringify(content));
  }
  return { root, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/** `count` lines of text, each ending with a line break: `line 1`, `line 2`, …, prefixed with `prefix`. */
export function lines(count: number, prefix = '  // line '): string {
  return Array.from({ length: count }, (_, i) => `${prefix}${i + 1}\n`).join('');
}
