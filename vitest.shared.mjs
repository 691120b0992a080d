// The one place that says how a package's tests run. Inside the repository, workspace packages
// resolve to their TypeScript sources through the "@kvreuse/source" export condition.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultServerConditions } from 'vite';
import { defineProject } from 'vitest/config';

const conditions = ['@kvreuse/source', ...defaultServerConditions];
const root = dirname(fileURLToPath(import.meta.url));
const resultsDir = join(root, '.test-results');

export function kvreuseProject(name, test = {}) {
  return defineProject({
    resolve: { conditions },
    ssr: { resolve: { conditions } },
    test: {
      name,
      include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
      // Forked workers: a native crash fails the file it happened in, not the run.
      pool: 'forks',
      // Nothing left in the temporary folder: the run's own, checked when it ends (vitest.temp-folder.mjs).
      globalSetup: [join(root, 'vitest.temp-folder.mjs')],
      // Hang guards, not speed checks: on a shared 2-core machine under load a test that spawns a
      // binary or a rank process can take several times its usual seconds.
      testTimeout: 30_000,
      hookTimeout: 30_000,
      // scripts/dev.mjs sums these into the run's closing "N passed, N failed" line.
      reporters: ['default', 'json'],
      outputFile: { json: join(resultsDir, `${name}.json`) },
      ...test,
    },
  });
}
