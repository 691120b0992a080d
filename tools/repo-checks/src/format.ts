import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import * as prettier from 'prettier';

export interface FormatProblem {
  /** Relative to the repository, with forward slashes. */
  file: string;
  rule: 'unformatted' | 'unparsable';
  message: string;
}

/** Folders never looked into, as Prettier's command line skips them. */
const skippedFolders = new Set(['node_modules', '.git', '.hg', '.svn', '.sl', '.jj']);

/**
 * The files Prettier formats in the repository, as `prettier --check .` at its root finds them: every
 * file of a language Prettier knows, but those that the root .gitignore and .prettierignore ignore; sorted.
 */
export async function formattedFiles(repoRoot: string): Promise<string[]> {
  const ignorePath = ['.gitignore', '.prettierignore']
    .map((name) => join(repoRoot, name))
    .filter((path) => existsSync(path));
  const candidates: string[] = [];
  const walk = (folder: string): void => {
    for (const entry of readdirSync(folder)) {
      if (skippedFolders.has(entry)) continue;
      const path = join(folder, entry);
      if (statSync(path).isDirectory()) walk(path);
      else candidates.push(path);
    }
  };
  walk(repoRoot);
  const found: string[] = [];
  for (const path of candidates) {
    const info = await prettier.getFileInfo(path, { ignorePath });
    if (!info.ignored && info.inferredParser !== null) found.push(relative(repoRoot, path).split(sep).join('/'));
  }
  return found.sort();
}

/**
 * Checks every file of `formattedFiles` against Prettier with the repository's configuration (its
 * prettier.config.mjs and .editorconfig, as the command line reads them): each file that Prettier would
 * change, or cannot parse, is a problem. `pnpm format` at the root fixes the first kind.
 */
export async function checkFormat(repoRoot: string): Promise<FormatProblem[]> {
  const problems: FormatProblem[] = [];
  for (const file of await formattedFiles(repoRoot)) {
    const path = join(repoRoot, file);
    const options = await prettier.resolveConfig(path, { editorconfig: true });
    try {
      if (!(await prettier.check(readFileSync(path, 'utf8'), { ...options, filepath: path }))) {
        problems.push({ file, rule: 'unformatted', message: `${file} is not formatted: run \`pnpm format\`` });
      }
    } catch (error) {
      const reason = error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error);
      problems.push({ file, rule: 'unparsable', message: `${file} cannot be formatted: ${reason}` });
    }
  }
  return problems;
}
