// Type-checks every ```ts program of the READMEs as a TypeScript user's project would: each program a
// module of its own, the packages resolved by their names to the types they publish, the repository's
// strict compiler options. Part of this package's `typecheck`; it needs the packages built.
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runnablePrograms } from './snippets.js';

const toolDir = fileURLToPath(new URL('..', import.meta.url));
const root = join(toolDir, '../..');
const checkDir = join(toolDir, '.snippets', 'typecheck');

rmSync(checkDir, { recursive: true, force: true });
mkdirSync(checkDir, { recursive: true });
const programs = runnablePrograms(root).filter(
  (program) => program.language === 'ts' || program.language === 'typescript',
);
for (const program of programs)
  writeFileSync(join(checkDir, `${program.path.replaceAll('/', '-')}-${program.lines[0]}.ts`), program.code);
// No "@kvreuse/source" condition: the published types, as an installed package gives them.
const tsconfig = {
  extends: '../../../../tsconfig.base.json',
  compilerOptions: { noEmit: true, customConditions: [] },
  include: ['*.ts'],
};
writeFileSync(join(checkDir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', join(checkDir, 'tsconfig.json')], { stdio: 'inherit' });
// Each file opens with the README and line its program starts at, so an error names where to fix it.
if (result.status !== 0)
  console.error(
    `readme-snippets: ${programs.length} README programs type-checked in ${checkDir}; fix the README lines named in each file's first comment`,
  );
process.exitCode = result.status ?? 1;
