// The one place that says how a package's tests run. Inside the repository, workspace packages
// resolve to their TypeScript sources through the "@kvreuse/source" export condition.
import { defaultServerConditions } from 'vite';
import { defineProject } from 'vitest/config';

const conditions = ['@kvreuse/source', ...defaultServerConditions];

export function kvreuseProject(name, test = {}) {
  return defineProject({
    resolve: { conditions },
    ssr: { resolve: { conditions } },
    test: {
      name,
      include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
      // Forked workers: a native crash fails the file it happened in, not the run.
      pool: 'forks',
      ...test,
    },
  });
}
