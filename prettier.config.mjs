// Prettier formats the TypeScript, JavaScript and JSON of the repository: `pnpm format` writes,
// `pnpm format:check` (and tools/repo-checks/src/format.test.ts) lists what is not formatted.
// Markdown, YAML and the generated files keep their own layout (.prettierignore); the C of native/ has
// clang-format.
//
// The options are those of the code as it was written: single quotes, semicolons, trailing commas
// wherever they are allowed, parentheses around every arrow function's parameters. 120 columns, as the
// C of native/, so that a line reads whole in a review beside its neighbour.

/** @type {import('prettier').Config} */
export default {
  printWidth: 120,
  singleQuote: true,
  trailingComma: 'all',
  semi: true,
  arrowParens: 'always',
  endOfLine: 'lf',
};
