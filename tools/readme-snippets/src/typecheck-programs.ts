// Type-checks every ```ts program and every ```ts fragment (with its stated context) of the READMEs
// and the package reference pages, as a TypeScript user's project would. Part of this package's
// `typecheck`; it needs the packages built.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { documentFragments } from './fragments.js';
import { runnablePrograms } from './snippets.js';
import { typeErrorLine, typeErrorsOf } from './typecheck.js';

const toolDir = fileURLToPath(new URL('..', import.meta.url));
const root = join(toolDir, '../..');
const checkDir = join(toolDir, '.snippets', 'typecheck');

const programs = [...runnablePrograms(root), ...documentFragments(root)].filter(
  (program) => program.language === 'ts' || program.language === 'typescript',
);
const errors = typeErrorsOf(programs, checkDir);
for (const error of errors) console.error(typeErrorLine(root, error));
if (errors.length > 0)
  console.error(
    `readme-snippets: ${programs.length} README programs and fragments type-checked in ${checkDir}; fix the document lines named above`,
  );
process.exitCode = errors.length > 0 ? 1 : 0;
