import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openingProblems } from './readme-opening.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const glossary = 'The words are in the [glossary](../../docs/glossary.md).\n';

describe('openingProblems', () => {
  it('every package README opens with its install line and a quick start, and links the glossary', () => {
    // A platform package (the library prebuilt for one cpu) is not installed by hand: its README says so.
    const installable = readdirSync(join(root, 'packages')).filter(
      (dir) =>
        (JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8')) as { cpu?: string[] }).cpu ===
        undefined,
    );
    const problems = installable.flatMap((dir) => {
      const path = `packages/${dir}/README.md`;
      return openingProblems(path, readFileSync(join(root, path), 'utf8'), `@kvreuse/${dir}`);
    });
    expect(problems).toEqual([]);
  });

  it('accepts a README that installs the package first and starts with a quick start', () => {
    const markdown = `# @kvreuse/x\n\nWhat it is.\n\n\`\`\`sh\nnpm install @kvreuse/x\nnpm install /t/*.tgz\n\`\`\`\n\n## Quick start\n\n\`\`\`ts\nconsole.log(1);\n\`\`\`\n${glossary}`;
    expect(openingProblems('R.md', markdown, '@kvreuse/x')).toEqual([]);
  });

  it('names each thing a README opens without', () => {
    const markdown = '# @kvreuse/x\n\n```ts\nconsole.log(1);\n```\n\n## Usage\n\n```sh\nnpm install @kvreuse/xy\n```\n';
    expect(openingProblems('R.md', markdown, '@kvreuse/x')).toEqual([
      'R.md: its first code block must be a sh block with "npm install @kvreuse/x"',
      'R.md: its first code block must also install from a release\'s tarballs ("npm install …/*.tgz", docs/install.md)',
      'R.md: its first section must be the quick start ("## Quick start…"), is "Usage"',
      'R.md: it must link the glossary (../../docs/glossary.md)',
    ]);
  });
});
