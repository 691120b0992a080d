import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { productionClosure } from './dependency-closure.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');

describe('productionClosure', () => {
  it('brings the router in without the native library or a store driver', () => {
    const closure = productionClosure(join(repoRoot, 'packages/router'));
    expect(closure).toContain('@kvreuse/discovery');
    expect(closure).toContain('@kvreuse/inventory');
    for (const heavy of ['better-sqlite3', 'etcd3', 'koffi', '@kvreuse/native-bindings', '@kvreuse/registry'])
      expect(closure).not.toContain(heavy);
  });

  it('follows dependencies through workspace packages to the drivers of the packages that open stores', () => {
    const closure = productionClosure(join(repoRoot, 'packages/cli'));
    for (const needed of [
      '@kvreuse/router',
      '@kvreuse/discovery',
      'better-sqlite3',
      'etcd3',
      'koffi',
      '@kvreuse/native-bindings',
    ])
      expect(closure).toContain(needed);
  });
});
