import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import type { Program } from './snippets.js';

export interface ProgramRun {
  /** The exit code, or the signal that ended the process. */
  readonly exit: number | string;
  readonly stdout: string;
  readonly stderr: string;
}

const toolDir = fileURLToPath(new URL('..', import.meta.url));
// Inside this package, so that `@kvreuse/…` imports resolve as a user's would: to the packages' builds.
const scratchDir = join(toolDir, '.snippets');
// A hang guard, not a speed check: a program that never ends fails with what it printed.
const hangGuardMs = 90_000;

/** The environment of a user's shell: the caller's, without the KVREUSE_* variables of the test run. */
function userEnvironment(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('KVREUSE_')));
}

/**
 * Writes the program to a module of its own in a fresh folder and runs it there with node, as a user
 * would run a file holding it; the folder (and whatever the program wrote to it) is removed after. A
 * TypeScript program has its types stripped first, here (a loader such as tsx in every child costs
 * seconds each on a loaded machine); the `typecheck` script checks the types.
 */
export async function runProgram(program: Program): Promise<ProgramRun> {
  mkdirSync(scratchDir, { recursive: true });
  const cwd = mkdtempSync(join(scratchDir, `${program.path.replaceAll('/', '-')}-${program.lines[0]}-`));
  const file = join(cwd, 'snippet.mjs');
  writeFileSync(file, program.language.startsWith('t') ? stripTypes(program.code) : program.code);
  try {
    return await run(process.execPath, [file], cwd);
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}

function stripTypes(code: string): string {
  const compilerOptions = { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2023 };
  return ts.transpileModule(code, { compilerOptions }).outputText;
}

function run(command: string, args: string[], cwd: string): Promise<ProgramRun> {
  const child = spawn(command, args, { cwd, env: userEnvironment(), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const guard = setTimeout(() => child.kill('SIGKILL'), hangGuardMs);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(guard);
      resolve({ exit: code ?? (signal as string), stdout, stderr });
    });
  });
}
