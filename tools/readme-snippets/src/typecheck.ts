import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
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
  const programOfFile = new Map<string, Program>();
  for (const program of programs) {
    const file = join(dir, `${program.path.replaceAll('/', '-')}-${program.lines[0]}.ts`);
    writeFileSync(file, program.code);
    programOfFile.set(file, program);
  }
  // No "@kvreuse/source" condition: the published types, as an installed package gives them.
  const tsconfig = { extends: baseConfig, compilerOptions: { noEmit: true, customConditions: [] }, include: ['*.ts'] };
  const config = ts.parseJsonConfigFileContent(tsconfig, ts.sys, dir);
  const checked = ts.createProgram(config.fileNames, config.options);
  return [...config.errors, ...ts.getPreEmitDiagnostics(checked)].map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (diagnostic.file === undefined || diagnostic.start === undefined) return { path: '', line: 0, message };
    const line = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start).line + 1;
    const program = programOfFile.get(resolve(diagnostic.file.fileName));
    const written = (program === undefined ? undefined : documentLineOf(program, line)) ?? {
      path: diagnostic.file.fileName,
      line,
    };
    return { ...written, message };
  });
}

/**
 * A type error as one line, its document named by its absolute path (`root` is the repository's), so that
 * a terminal or editor opens it from wherever the check was run.
 */
export function typeErrorLine(root: string, { path, line, message }: TypeDiagnostic): string {
  return path === '' ? message : `${resolve(root, path)}:${line}: ${message}`;
}
