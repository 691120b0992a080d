// Prints what the format, size and circle checks find in the repository today, in full: the files
// Prettier would change, every file and function over its size, and every circle with the edges that
// close it.
//   pnpm --filter @kvreuse-internal/repo-checks report
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkImportCircles, checkNativeCircles, type Circle } from './circles.js';
import { checkFormat } from './format.js';
import { checkSizes, type SizeViolation } from './sizes.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

function printSizes(title: string, violations: SizeViolation[]): void {
  console.log(`\n${title}: ${violations.length}`);
  for (const violation of violations) console.log(`  ${violation.message}`);
}

function printCircles(title: string, circles: Circle[]): void {
  console.log(`\n${title}: ${circles.length}`);
  for (const circle of circles) {
    console.log(`  ${circle.message}`);
    for (const [from, to] of circle.edges) console.log(`      ${from} → ${to}`);
  }
}

const sizes = checkSizes(repoRoot);
printSizes(
  'Sources over their size',
  sizes.filter((violation) => !violation.test),
);
printSizes(
  'Test files over their size',
  sizes.filter((violation) => violation.test),
);
printCircles('Circles of imports', checkImportCircles(repoRoot));
printCircles('Circles in native/', checkNativeCircles(repoRoot));
const format = await checkFormat(repoRoot);
console.log(`\nFiles Prettier would change or cannot parse: ${format.length}`);
for (const problem of format) console.log(`  ${problem.message}`);
