// Prettier formats the TypeScript, JavaScript and JSON of the repository: `pnpm format` writes,
// `pnpm format:check` (and tools/repo-checks/src/format.test.ts) lists what is not formatted.
// Markdown, YAML and the generated files keep their own layout (.prettierignore); the C of native/ has
// clang-format.
//
// The options are those of the code as it was written: single quotes, semicolons, trailing commas
// wherever they are allowed, parentheses around every arrow function's parameters. The width is the one
// that leaves the fewest files to rewrite: lines were written up to about 200 characters, wrapped by
// hand at no fixed width (of 616 files, 478 change at 120 columns, 306 at 160, 267 at 200, 267 at 220).

/** @type {import('prettier').Config} */
export default {
  printWidth: 200,
  singleQuote: true,
  trailingComma: 'all',
  semi: true,
  arrowParens: 'always',
  endOfLine: 'lf',
};
