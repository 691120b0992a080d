import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { checkImportCircles, checkNativeCircles, type Circle, stronglyConnected } from './circles.js';
import { writeTree } from './fixture-tree.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

/** What a failure shows of a circle: its message, and each edge to cut. */
const shown = (circle: Circle): { circle: string; edges: string[] } => ({
  circle: circle.message,
  edges: circle.edges.map((edge) => edge.join(' → ')),
});

describe('the repository', () => {
  it('has no circle of imports among the modules of any package, tool, the examples or scripts/', () => {
    expect(checkImportCircles(repoRoot).map(shown)).toEqual([]);
  });

  it('has no circle of #include among the C files of native/', () => {
    expect(checkNativeCircles(repoRoot, ['include']).map(shown)).toEqual([]);
  });

  it('has no circle of calls among the .c files of native/src', () => {
    expect(checkNativeCircles(repoRoot, ['call']).map(shown)).toEqual([]);
  });
});

describe('stronglyConnected', () => {
  it('finds each set of files that reach each other, and a file that depends on itself, but no chain or diamond', () => {
    const graph = new Map([
      ['a', new Set(['b'])],
      ['b', new Set(['c', 'd'])],
      ['c', new Set(['a'])],
      ['d', new Set(['e', 'f'])],
      ['e', new Set(['g'])],
      ['f', new Set(['g'])],
      ['g', new Set<string>()],
      ['h', new Set(['h'])],
    ]);
    expect(stronglyConnected(graph)).toEqual([['a', 'b', 'c'], ['h']]);
  });
});

describe('checkImportCircles', () => {
  let remove = (): void => {};
  afterEach(() => remove());

  function tree(files: Record<string, string | object>): string {
    const made = writeTree(files, 'kvreuse-circles-');
    remove = made.remove;
    return made.root;
  }

  it('names the files of each circle of relative imports, type-only imports, re-exports and dynamic imports included', () => {
    const root = tree({
      'packages/a/package.json': { name: '@kvreuse/a' },
      'packages/a/src/errors.ts': "import type { Reason } from './compat.js';\nexport class E { reason?: Reason; }\n",
      'packages/a/src/compat.ts':
        "import { E } from './errors.js';\nexport type Reason = string;\nexport const e = new E();\n",
      'packages/a/src/one.ts': "export * from './two.js';\n",
      'packages/a/src/two.ts': "export const two = async () => import('./three.js');\n",
      'packages/a/src/three.ts': "export { one } from './one.js';\n",
      // A chain and a diamond are no circle.
      'packages/a/src/index.ts': "export * from './left.js';\nexport * from './right.js';\n",
      'packages/a/src/left.ts': "export * from './base.js';\n",
      'packages/a/src/right.ts': "export * from './base.js';\n",
      'packages/a/src/base.ts': 'export const base = 1;\n',
      'tools/t/package.json': { name: 't' },
      'tools/t/src/self.ts': "import { self } from './self.js';\nexport { self };\n",
      'scripts/a.mjs': "import { b } from './b.mjs';\nexport const a = b;\n",
      'scripts/b.mjs': "import { a } from './a.mjs';\nexport const b = a;\n",
    });
    expect(checkImportCircles(root).map((circle) => circle.message)).toEqual([
      'packages/a: src/compat.ts, src/errors.ts import each other in a circle: src/compat.ts → src/errors.ts → src/compat.ts',
      'packages/a: src/one.ts, src/three.ts, src/two.ts import each other in a circle: src/one.ts → src/two.ts → src/three.ts → src/one.ts (3 imports between them)',
      'tools/t: src/self.ts imports itself: src/self.ts → src/self.ts',
      'scripts: a.mjs, b.mjs import each other in a circle: a.mjs → b.mjs → a.mjs',
    ]);
  });

  it('looks only inside each package: a circle through another package, or through a build, is not one of its modules', () => {
    const root = tree({
      'packages/a/package.json': { name: '@kvreuse/a' },
      'packages/a/src/a.ts':
        "import { b } from '../../b/src/b.js';\nimport { built } from '../dist/a.js';\nexport const a = b + built;\n",
      'packages/a/dist/a.js': "import { a } from '../src/a.js';\nexport const built = a;\n",
      'packages/b/package.json': { name: '@kvreuse/b' },
      'packages/b/src/b.ts': "import { a } from '../../a/src/a.js';\nexport const b = a;\n",
    });
    expect(checkImportCircles(root)).toEqual([]);
  });
});

describe('checkNativeCircles', () => {
  let remove = (): void => {};
  afterEach(() => remove());

  it('names the headers that include each other and the .c files that call each other, includes in comments and static functions aside', () => {
    const made = writeTree(
      {
        'native/include/api.h': '#include "internal.h"\nint api(void);\n',
        'native/src/internal.h': '#include "api.h" /* through -Iinclude */\n// #include "util.h"\n',
        'native/src/util.h': '#include "internal.h"\n',
        'native/src/agent.c':
          '#include "internal.h"\nint agent(void) { return peer(); }\nstatic int helper(void) { return 0; }\n',
        'native/src/peer.c': '#include "internal.h"\nint peer(void) { return agent(); }\n',
        // util.c calls a helper of its own with the name of agent.c's static one, and agent(): no circle.
        'native/src/util.c':
          '#include "util.h"\nstatic int helper(void) { return agent(); }\nint util(void) { return helper(); }\n',
      },
      'kvreuse-circles-',
    );
    remove = made.remove;
    const circles = checkNativeCircles(made.root);
    expect(circles.map((circle) => circle.message)).toEqual([
      'native: include/api.h, src/internal.h include each other in a circle: include/api.h → src/internal.h → include/api.h',
      'native: src/agent.c, src/peer.c call functions of each other in a circle: src/agent.c → src/peer.c → src/agent.c',
    ]);
    expect(circles[1]?.edges).toEqual([
      ['src/agent.c', 'src/peer.c'],
      ['src/peer.c', 'src/agent.c'],
    ]);
  });
});
