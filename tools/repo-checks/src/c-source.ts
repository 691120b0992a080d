// A small scanner of C sources, enough for the checks of sizes and circles: what is code (comments,
// string and character literals and preprocessor lines blanked out), the `#include "…"` lines, and the
// function definitions at file scope. It does not preprocess: code under #if counts as written.

/**
 * The text with every comment, string literal, character literal and preprocessor line (continuations
 * included) replaced by spaces, line breaks kept: the same length, the same lines, only code left.
 */
export function codeOnly(text: string): string {
  const out = text.split('');
  const blank = (from: number, to: number): void => {
    for (let i = from; i < to; i++) if (out[i] !== '\n') out[i] = ' ';
  };
  let i = 0;
  let lineStart = true;
  while (i < text.length) {
    const c = text[i];
    if (c === '\n') {
      lineStart = true;
      i++;
      continue;
    }
    if (lineStart && (c === ' ' || c === '\t')) {
      i++;
      continue;
    }
    if (lineStart && c === '#') {
      // A preprocessor line runs to the first line break not escaped by a backslash; comments inside it go with it.
      let end = i;
      while (end < text.length) {
        if (text[end] === '\n' && text[end - 1] !== '\\') break;
        if (text.startsWith('/*', end)) {
          const close = text.indexOf('*/', end + 2);
          end = close < 0 ? text.length : close + 2;
          continue;
        }
        end++;
      }
      blank(i, end);
      i = end;
      continue;
    }
    lineStart = false;
    if (text.startsWith('//', i)) {
      let end = text.indexOf('\n', i);
      if (end < 0) end = text.length;
      blank(i, end);
      i = end;
    } else if (text.startsWith('/*', i)) {
      const close = text.indexOf('*/', i + 2);
      const end = close < 0 ? text.length : close + 2;
      blank(i, end);
      i = end;
    } else if (c === '"' || c === "'") {
      let end = i + 1;
      while (end < text.length && text[end] !== c && text[end] !== '\n') end += text[end] === '\\' ? 2 : 1;
      end = Math.min(end + 1, text.length);
      blank(i, end);
      i = end;
    } else {
      i++;
    }
  }
  return out.join('');
}

/** The project headers a C file includes: the names inside `#include "…"`, in order. */
export function quotedIncludes(text: string): string[] {
  const found: string[] = [];
  // Comments are blanked first, so that an include in a comment does not count; preprocessor lines are kept.
  for (const match of withoutComments(text).matchAll(/^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"/gm))
    found.push(match[1] as string);
  return found;
}

function withoutComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, (comment) => comment.replace(/[^\n]/g, ' '));
}

export interface CFunction {
  name: string;
  /** Whether it is `static`: seen only inside its own file. */
  isStatic: boolean;
  /** 1-based: the line where the definition starts (its return type), and the line of its closing brace. */
  startLine: number;
  endLine: number;
  /** Offsets in the text of the body's braces. */
  bodyStart: number;
  bodyEnd: number;
}

const keywordsBeforeParen = new Set([
  'if',
  'for',
  'while',
  'switch',
  'return',
  'sizeof',
  '_Alignof',
  'alignof',
  '__attribute__',
  '__typeof__',
  'typeof',
  'defined',
]);

/**
 * The function definitions at file scope of a C file: every `{` at brace depth 0 whose declaration
 * (the code since the last `;` or `}` at depth 0) ends with a parameter list. Struct, union and enum
 * bodies and initializers are not functions and are skipped.
 */
export function cFunctions(text: string): CFunction[] {
  const code = codeOnly(text);
  const lineOf = lineIndex(text);
  const functions: CFunction[] = [];
  let depth = 0;
  let declarationStart = 0;
  let bodyStart = -1;
  let pending: Omit<CFunction, 'endLine' | 'bodyEnd'> | undefined;
  for (let i = 0; i < code.length; i++) {
    const c = code[i];
    if (c === '{') {
      if (depth === 0) {
        bodyStart = i;
        pending = functionHeader(code, declarationStart, i, lineOf);
      }
      depth++;
    } else if (c === '}') {
      depth = Math.max(0, depth - 1);
      if (depth === 0) {
        if (pending !== undefined) functions.push({ ...pending, bodyStart, endLine: lineOf(i), bodyEnd: i });
        pending = undefined;
        declarationStart = i + 1;
      }
    } else if (c === ';' && depth === 0) {
      declarationStart = i + 1;
    }
  }
  return functions;
}

function functionHeader(
  code: string,
  from: number,
  brace: number,
  lineOf: (offset: number) => number,
): Omit<CFunction, 'endLine' | 'bodyEnd'> | undefined {
  const header = code.slice(from, brace);
  const trimmed = header.trimEnd();
  if (!trimmed.endsWith(')')) return undefined;
  // The parameter list: the balanced parentheses at the end of the declaration; the name is the identifier before them.
  let depth = 0;
  let open = -1;
  for (let j = trimmed.length - 1; j >= 0; j--) {
    if (trimmed[j] === ')') depth++;
    else if (trimmed[j] === '(' && --depth === 0) {
      open = j;
      break;
    }
  }
  if (open < 0) return undefined;
  const name = /([A-Za-z_]\w*)\s*$/.exec(trimmed.slice(0, open))?.[1];
  if (name === undefined || keywordsBeforeParen.has(name)) return undefined;
  // The definition starts after the last blank line before it: what comes earlier, with no semicolon
  // between, is a macro invoked at file scope (`CASES(DEFINE_CASE)`), not this function's return type.
  const blankLine = /\n[ \t]*\n(?![\s\S]*\n[ \t]*\n)/.exec(trimmed.slice(0, open));
  const declaration = blankLine === null ? header : header.slice(blankLine.index + blankLine[0].length);
  const start = from + (header.length - declaration.length) + (declaration.length - declaration.trimStart().length);
  return {
    name,
    isStatic: /(^|\W)static(\W|$)/.test(code.slice(start, from + open)),
    startLine: lineOf(start),
    bodyStart: brace,
  };
}

/** A function from an offset in `text` to its 1-based line. */
export function lineIndex(text: string): (offset: number) => number {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === '\n') starts.push(i + 1);
  return (offset) => {
    let low = 0;
    let high = starts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if ((starts[mid] as number) <= offset) low = mid;
      else high = mid - 1;
    }
    return low + 1;
  };
}

/** The number of lines of a file: a last line without a line break counts, an empty last "line" after one does not. */
export function lineCount(text: string): number {
  if (text.length === 0) return 0;
  const breaks = text.split('\n').length - 1;
  return text.endsWith('\n') ? breaks : breaks + 1;
}
