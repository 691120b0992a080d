import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { type DocumentLine, documentLineOf } from './document-lines.js';
import type { Program } from './snippets.js';

const baseConfig = fileURLToPath(new URL('../../../tsconfig.base.json', import.meta.url));

/**
 * One type error: the document line of the program that it is in (or, for one outside every program,
 * the file the compiler read and its line; '' and 0 for one of no file), and the message.
 */
export interface TypeDiagnostic extends DocumentLine {
  readonly message: string;
}

/**
 * Type-checks each program as a module of its own of a TypeScript user's project: written to a file
 * of `dir` (emptied first; inside this package, so that `@kvreuse/…` imports resolve as a user's
 * would), the packages resolved by their names to the types they publish (they must be built), the
 * repository's strict compiler options. An error is named by the document line its program was
 * written from, where it is fixed.
 */
export function typeErrorsOf(programs: readonly Program[], dir: string): TypeDiagnostic[] {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const program of programs)
    writeFileSync(join(dir, `${program.path.replaceAll('/', '-')}-${program.lines[0]}.ts`), program.code);
  // No "@kvreuse/source" condition: the published types, as an installed package gives them.
  const tsconfig = { extends: baseConfig, compilerOptions: { noEmit: true, customConditions: [] }, include: ['*.ts'] };
  const config = ts.parseJsonConfigFileContent(tsconfig, ts.sys, dir);
  const checked = ts.createProgram(config.fileNames, config.options);
  return [...config.errors, ...ts.getPreEmitDiagnostics(checked)].map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (diagnostic.file === undefined || diagnostic.start === undefined) return { path: '', line: 0, message };
    const line = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start).line + 1;
    const written = documentLineOf(diagnostic.file.text, line) ?? { path: diagnostic.file.fileName, line };
    return { ...written, message };
  });
}
