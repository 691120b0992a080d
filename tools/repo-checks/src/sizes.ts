import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { cFunctions, lineCount } from './c-source.js';

/** The longest a source file may be, in lines. */
export const maxFileLines = 800;
/** The longest a function may be, in lines: from the first line of its declaration to its last. */
export const maxFunctionLines = 80;

export type SizeRule = 'file-too-long' | 'function-too-long';

export interface SizeViolation {
  rule: SizeRule;
  /** Relative to the repository, with forward slashes. */
  file: string;
  /** A test file (`*.test.ts`, or under a package's test/ folder, or native/test and native/fuzz) rather than a source. */
  test: boolean;
  /** For a function: how the check names it (`Class.method`, `callback of describe('…')`, …). */
  function?: string;
  /** The first line of the function; 1 for a file. */
  line: number;
  lines: number;
  limit: number;
  message: string;
}

const skippedFolders = new Set(['node_modules', 'dist', 'build', '.turbo', 'coverage']);

function walk(folder: string, accept: (name: string) => boolean, found: string[] = []): string[] {
  if (!existsSync(folder)) return found;
  for (const entry of readdirSync(folder).sort()) {
    if (skippedFolders.has(entry)) continue;
    const path = join(folder, entry);
    if (statSync(path).isDirectory()) walk(path, accept, found);
    else if (accept(entry)) found.push(path);
  }
  return found;
}

const typeScriptSource = (name: string): boolean =>
  /\.(ts|mts|cts|js|mjs|cjs)$/.test(name) && !/\.d\.[mc]?ts$/.test(name);
const cSource = (name: string): boolean => /\.[ch]$/.test(name);

function subfolders(folder: string): string[] {
  return existsSync(folder)
    ? readdirSync(folder)
        .sort()
        .filter((entry) => statSync(join(folder, entry)).isDirectory())
    : [];
}

/**
 * The files the check measures, relative to the repository: the TypeScript and JavaScript of
 * packages/<name>/src and test, tools/<name>/src and test and scripts/; the C of native/src,
 * native/include, native/test and native/fuzz.
 */
export function sizedFiles(repoRoot: string): string[] {
  const folders = [
    ...['packages', 'tools'].flatMap((parent) =>
      subfolders(join(repoRoot, parent)).flatMap((name) => ['src', 'test'].map((sub) => join(parent, name, sub))),
    ),
    'scripts',
  ];
  const typeScript = folders.flatMap((folder) => walk(join(repoRoot, folder), typeScriptSource));
  const c = ['native/src', 'native/include', 'native/test', 'native/fuzz'].flatMap((folder) =>
    walk(join(repoRoot, folder), cSource),
  );
  return [...typeScript, ...c].map((path) => relative(repoRoot, path).split('\\').join('/'));
}

/** Whether a file is a test: its name says so, or it sits in a test folder of a package, a tool or native/ (native/fuzz holds fuzz targets). */
export function isTestFile(file: string): boolean {
  return (
    /\.test\.[a-z]+$/.test(file) || /^(packages|tools)\/[^/]+\/test\//.test(file) || /^native\/(test|fuzz)\//.test(file)
  );
}

export interface MeasuredFunction {
  name: string;
  line: number;
  lines: number;
}

/**
 * Whether a function is the body of a test suite, `describe('…', () => { … })` (or describe.each, .skip,
 * .only, …): a group of tests rather than a function, as long as the tests it holds; each test in it is
 * measured on its own.
 */
function isSuiteBody(node: FunctionWithBody, source: ts.SourceFile): boolean {
  const call = node.parent;
  if (!ts.isCallExpression(call) || !call.arguments.includes(node as ts.Expression)) return false;
  return /^(describe|suite)\b/.test(call.expression.getText(source));
}

/**
 * Every function of a TypeScript or JavaScript file with a body, nested ones included, with its length;
 * the bodies of test suites are not functions in this sense (isSuiteBody).
 */
export function typeScriptFunctions(fileName: string, text: string): MeasuredFunction[] {
  const kind = /\.[mc]?js$/.test(fileName) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, kind);
  const lineOf = (offset: number): number => source.getLineAndCharacterOfPosition(offset).line + 1;
  const found: MeasuredFunction[] = [];
  const visit = (node: ts.Node): void => {
    if (isFunctionWithBody(node) && !isSuiteBody(node, source)) {
      const line = lineOf(node.getStart(source));
      found.push({ name: functionName(node, source), line, lines: lineOf(node.getEnd()) - line + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

type FunctionWithBody = ts.FunctionLikeDeclaration & { body: ts.Node };

function isFunctionWithBody(node: ts.Node): node is FunctionWithBody {
  return (
    (ts.isFunctionDeclaration(node) ||
      ts.isFunctionExpression(node) ||
      ts.isArrowFunction(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isGetAccessorDeclaration(node) ||
      ts.isSetAccessorDeclaration(node)) &&
    node.body !== undefined
  );
}

function propertyName(name: ts.PropertyName | ts.BindingName, source: ts.SourceFile): string {
  return ts.isIdentifier(name) || ts.isPrivateIdentifier(name) || ts.isStringLiteral(name) || ts.isNumericLiteral(name)
    ? name.text
    : name.getText(source);
}

function className(node: ts.Node, source: ts.SourceFile): string | undefined {
  const parent = node.parent;
  if (parent !== undefined && (ts.isClassDeclaration(parent) || ts.isClassExpression(parent)))
    return parent.name?.text ?? '(anonymous class)';
  return undefined;
}

/** How a message names a function: its own name, the class it is a member of, or the call it is passed to. */
function functionName(node: FunctionWithBody, source: ts.SourceFile): string {
  const owner = className(node, source);
  const member = (name: string): string => (owner === undefined ? name : `${owner}.${name}`);
  if (ts.isConstructorDeclaration(node)) return member('constructor');
  if (ts.isGetAccessorDeclaration(node)) return `get ${member(propertyName(node.name, source))}`;
  if (ts.isSetAccessorDeclaration(node)) return `set ${member(propertyName(node.name, source))}`;
  if (ts.isMethodDeclaration(node)) return member(propertyName(node.name, source));
  if (ts.isFunctionDeclaration(node)) return node.name?.text ?? 'default export function';
  if (ts.isFunctionExpression(node) && node.name !== undefined) return node.name.text;
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) return propertyName(parent.name, source);
  if (ts.isPropertyDeclaration(parent))
    return `${className(parent, source) ?? ''}.${propertyName(parent.name, source)}`.replace(/^\./, '');
  if (ts.isBinaryExpression(parent) && parent.right === node) return parent.left.getText(source);
  if (ts.isExportAssignment(parent)) return 'default export';
  if (ts.isCallExpression(parent) || ts.isNewExpression(parent)) {
    const callee = parent.expression.getText(source);
    const title = parent.arguments?.[0];
    const titled =
      title !== undefined && title !== node && (ts.isStringLiteral(title) || ts.isNoSubstitutionTemplateLiteral(title));
    return `callback of ${callee}(${titled ? `'${title.text.length > 60 ? `${title.text.slice(0, 57)}...` : title.text}'` : '…'})`;
  }
  return ts.isArrowFunction(node) ? 'arrow function' : 'function expression';
}

/** Whether a file was written by a program (its first line says `Generated by`): its size is the generator's. */
const generated = (text: string): boolean => /^(\/\*|\/\/) Generated by /.test(text);

/**
 * Measures every file of `sizedFiles` but the generated ones: a file longer than `maxFileLines` and a
 * function longer than `maxFunctionLines` (TypeScript: functions, methods, arrow functions, constructors
 * and accessors, nested ones on their own as well as within their outer function; C: the function
 * definitions at file scope) are violations, in the order of the files and lines.
 */
export function checkSizes(
  repoRoot: string,
  limits: { fileLines?: number; functionLines?: number } = {},
): SizeViolation[] {
  const fileLimit = limits.fileLines ?? maxFileLines;
  const functionLimit = limits.functionLines ?? maxFunctionLines;
  const violations: SizeViolation[] = [];
  for (const file of sizedFiles(repoRoot)) {
    const text = readFileSync(join(repoRoot, file), 'utf8');
    if (generated(text)) continue;
    const test = isTestFile(file);
    const lines = lineCount(text);
    if (lines > fileLimit) {
      violations.push({
        rule: 'file-too-long',
        file,
        test,
        line: 1,
        lines,
        limit: fileLimit,
        message: `${file} is ${lines} lines long (at most ${fileLimit})`,
      });
    }
    const functions = cSource(file)
      ? cFunctions(text).map((fn) => ({ name: fn.name, line: fn.startLine, lines: fn.endLine - fn.startLine + 1 }))
      : typeScriptFunctions(file, text);
    for (const fn of functions) {
      if (fn.lines <= functionLimit) continue;
      violations.push({
        rule: 'function-too-long',
        file,
        test,
        function: fn.name,
        line: fn.line,
        lines: fn.lines,
        limit: functionLimit,
        message: `${file}:${fn.line}: ${fn.name} is ${fn.lines} lines long (at most ${functionLimit})`,
      });
    }
  }
  return violations;
}
