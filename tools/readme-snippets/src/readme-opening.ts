import { codeBlocks } from './snippets.js';

/**
 * What a stranger reads first in a package's README: the line that installs the package, in the first
 * code block with the line that installs it from a release's tarballs, and a quick start as its first section. Returns what is missing, in words.
 */
export function openingProblems(path: string, markdown: string, packageName: string): string[] {
  const problems: string[] = [];
  const first = codeBlocks(path, markdown)[0];
  const installs =
    first !== undefined &&
    first.language === 'sh' &&
    new RegExp(`^npm install (-g )?${packageName}\\b`, 'm').test(first.code);
  if (!installs) problems.push(`${path}: its first code block must be a sh block with "npm install ${packageName}"`);
  // Until the packages are on npm, the name alone installs nothing: the block says how from tarballs too.
  if (first !== undefined && !/^npm install (-g )?\S+\.tgz/m.test(first.code))
    problems.push(
      `${path}: its first code block must also install from a release's tarballs ("npm install …/*.tgz", docs/install.md)`,
    );
  const firstSection = /^## (.*)$/m.exec(markdown)?.[1];
  if (firstSection === undefined || !firstSection.startsWith('Quick start')) {
    problems.push(
      `${path}: its first section must be the quick start ("## Quick start…"), is ${JSON.stringify(firstSection ?? 'none')}`,
    );
  }
  if (!markdown.includes('](../../docs/glossary.md)'))
    problems.push(`${path}: it must link the glossary (../../docs/glossary.md)`);
  return problems;
}
