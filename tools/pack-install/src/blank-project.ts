// A project of a user's own, outside the workspace: `npm init -y`, ESM, and whatever it installs with npm.
import { copyFileSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join } from 'node:path';
import ts from 'typescript';
import { runToSuccess } from './run.js';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const workspaceTypes = join(createRequire(import.meta.url).resolve('@types/node/package.json'), '../..');

export interface BlankProjectOptions {
  /** The npm cache every project of a run shares. */
  npmCache: string;
  /**
   * Dependencies whose install scripts this project denies (`allowScripts: { name: false }`), as a
   * user may; npm runs the others, as it does by default.
   */
  deniedInstallScripts?: string[];
  /** Installs run no install script at all (`npm install --ignore-scripts`). */
  ignoreScripts?: boolean;
  /**
   * The only commands npm, npx and node find on PATH in this project (links in a folder of their own),
   * e.g. no C compiler; default: this process's PATH.
   */
  commands?: string[];
}

export interface LockedPackage {
  /** Its path in the project, e.g. `node_modules/@kvreuse/config`. */
  location: string;
  /** Where npm got it: `file:<tarball>` for a tarball, undefined for the registry (this machine's npm omits registry URLs). */
  resolved: string | undefined;
}

export class BlankProject {
  readonly dir: string;
  /** The folder that alone is on PATH when `commands` was given. */
  readonly path: string | undefined;
  readonly #npmCache: string;
  readonly #ignoreScripts: boolean;
  readonly #env: NodeJS.ProcessEnv;

  constructor(dir: string, options: BlankProjectOptions) {
    mkdirSync(dir, { recursive: true });
    this.dir = dir;
    this.#npmCache = options.npmCache;
    this.#ignoreScripts = options.ignoreScripts ?? false;
    this.path = options.commands === undefined ? undefined : commandFolder(`${dir}-path`, options.commands);
    this.#env = this.path === undefined ? process.env : { ...process.env, PATH: this.path };
    this.#run('npm', ['init', '-y']);
    const manifestPath = join(dir, 'package.json');
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as Record<string, unknown>;
    manifest['type'] = 'module';
    const denied = options.deniedInstallScripts ?? [];
    if (denied.length > 0) manifest['allowScripts'] = Object.fromEntries(denied.map((name) => [name, false]));
    writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
  }

  /**
   * `npm install`s the tarballs, and from the public registry what they depend on besides each other. A
   * registry request that fails is tried five times (npm's default is twice): a dropped connection to
   * the registry is the network's failure, not the package's.
   */
  install(tarballs: string[]): void {
    const ignoreScripts = this.#ignoreScripts ? ['--ignore-scripts'] : [];
    this.#run('npm', [
      'install',
      '--cache',
      this.#npmCache,
      '--prefer-offline',
      '--fetch-retries=5',
      '--no-audit',
      '--no-fund',
      ...ignoreScripts,
      ...tarballs,
    ]);
  }

  /** Runs a binary the project installed, as `npx --no-install` does; returns its stdout. */
  npx(binary: string, args: string[]): string {
    return this.#run('npx', ['--no-install', binary, ...args]);
  }

  #run(command: string, args: string[]): string {
    return runToSuccess(command, args, { cwd: this.dir, env: this.#env });
  }

  /** The installed packages whose location starts with `prefix`, from package-lock.json. */
  locked(prefix: string): LockedPackage[] {
    const lock = JSON.parse(readFileSync(join(this.dir, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { resolved?: string }>;
    };
    return Object.entries(lock.packages)
      .filter(([location]) => location.startsWith(prefix))
      .map(([location, entry]) => ({ location, resolved: entry.resolved }));
  }

  /** Runs a TypeScript file with node in the project, its types stripped; returns its stdout. */
  run(file: string): string {
    const script = `${basename(file, '.ts')}.mjs`;
    const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    writeFileSync(join(this.dir, script), outputText);
    return this.#run(process.execPath, [script]);
  }

  /**
   * Copies TypeScript files into the project and type-checks them together, strictly, as a user's code
   * (node16 resolution, the libraries' declarations checked too; @types/node is the workspace's).
   */
  typecheck(files: string[]): void {
    for (const file of files) copyFileSync(file, join(this.dir, basename(file)));
    const tsconfig = {
      compilerOptions: {
        target: 'es2022',
        module: 'node16',
        moduleResolution: 'node16',
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        typeRoots: [workspaceTypes],
        types: ['node'],
      },
      files: files.map((file) => basename(file)),
    };
    writeFileSync(join(this.dir, 'tsconfig.json'), `${JSON.stringify(tsconfig, null, 2)}\n`);
    runToSuccess(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: this.dir });
  }
}

/** A folder holding links to `commands` as this process's PATH finds them (node: this process's node). */
function commandFolder(folder: string, commands: string[]): string {
  mkdirSync(folder, { recursive: true });
  for (const command of commands) {
    const target =
      command === 'node'
        ? process.execPath
        : runToSuccess('sh', ['-c', `command -v ${command}`], { cwd: folder }).trim();
    symlinkSync(realpathSync(target), join(folder, command));
  }
  return folder;
}
