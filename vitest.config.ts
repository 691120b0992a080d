import { defineConfig } from 'vitest/config';

// `pnpm exec vitest run` at the root runs every package's tests, each as its own project.
export default defineConfig({
  test: { projects: ['packages/*', 'tools/*', 'examples'] },
});
