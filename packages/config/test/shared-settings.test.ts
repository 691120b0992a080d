// Two OS processes share one settings file and one environment while composing different groups: an
// older service that knows only `router` (foreignGroups: 'ignore') and a newer one that composes
// `router` and `transport`. The older one reports the newer group's settings as ignored instead of
// refusing to start; the newer one resolves both. Without the policy the older one refuses.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { temporaryDirectory } from './temporary-directory.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);
// Starting Node with tsx takes seconds on a loaded machine; no assertion here depends on how long.
vi.setConfig({ testTimeout: 120_000 });
const { write } = temporaryDirectory('kvreuse-config-shared-');

const SHARED_FILE = `# one file for every service of the deployment
router:
  enable_decode_to_prefill_reuse: true
  minimum_transfer_prefix_blocks: 8

transport:
  backend: loopback
  operation_timeout_ms: 1500
`;

const SHARED_ENV = {
  KVREUSE_ROUTER_MINIMUM_ESTIMATED_TTFT_SAVING_MS: '7.5',
  KVREUSE_TRANSPORT_ABANDON_TIMEOUT_MS: '6000',
};

interface Outcome {
  readonly exitCode: number;
  readonly report: Record<string, any>;
}

async function resolveInProcess(groups: string, foreignGroups: string, file: string): Promise<Outcome> {
  const args = [
    '--import',
    'tsx',
    '--conditions=@kvreuse/source',
    'test/process/resolve-composition.ts',
    groups,
    foreignGroups,
    file,
  ];
  // The test's own KVREUSE_* variables, if any, stay out: the two processes share exactly SHARED_ENV.
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('KVREUSE_')));
  const env = { ...inherited, ...SHARED_ENV };
  const outcome = await run(process.execPath, args, { cwd: packageDir, env }).then(
    ({ stdout }) => ({ exitCode: 0, stdout }),
    (error: { code: number; stdout: string; stderr: string }) => {
      if (typeof error.code !== 'number' || error.stdout === '') throw new Error(`the process failed: ${error.stderr}`);
      return { exitCode: error.code, stdout: error.stdout };
    },
  );
  return {
    exitCode: outcome.exitCode,
    report: JSON.parse(outcome.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, any>,
  };
}

describe('two processes sharing one settings file and one environment', () => {
  it('an older one composing router only ignores and reports the newer group; a newer one resolves both', async () => {
    const file = write('kvreuse.yaml', SHARED_FILE);
    const [older, newer] = await Promise.all([
      resolveInProcess('router', 'ignore', file),
      resolveInProcess('router,transport', 'error', file),
    ]);
    expect(older.report['pid']).not.toBe(newer.report['pid']);

    expect(older.exitCode).toBe(0);
    expect(older.report['event']).toBe('resolved');
    expect(Object.keys(older.report['settings'])).toEqual(['router']);
    expect(older.report['settings'].router).toMatchObject({
      enableDecodeToPrefillReuse: true,
      minimumTransferPrefixBlocks: 8,
      minimumEstimatedTtftSavingMs: 7.5,
    });
    expect(older.report['provenance'].router.minimumTransferPrefixBlocks).toEqual({
      source: 'file',
      path: file,
      line: 4,
    });
    expect(older.report['ignored']).toEqual([
      { name: 'transport.backend', source: { source: 'file', path: file, line: 7 }, group: 'transport' },
      { name: 'transport.operation_timeout_ms', source: { source: 'file', path: file, line: 8 }, group: 'transport' },
      {
        name: 'KVREUSE_TRANSPORT_ABANDON_TIMEOUT_MS',
        source: { source: 'env', variable: 'KVREUSE_TRANSPORT_ABANDON_TIMEOUT_MS' },
        group: 'transport',
      },
    ]);

    expect(newer.exitCode).toBe(0);
    expect(newer.report['event']).toBe('resolved');
    expect(newer.report['settings'].router).toMatchObject({
      minimumTransferPrefixBlocks: 8,
      minimumEstimatedTtftSavingMs: 7.5,
    });
    expect(newer.report['settings'].transport).toMatchObject({
      backend: 'loopback',
      library: '',
      operationTimeoutMs: 1500,
      abandonTimeoutMs: 6000,
      shutdownDeadlineMs: 10_000,
    });
    expect(newer.report['ignored']).toEqual([]);
  });

  it('the older one refuses to start under the default policy, naming the newer group', async () => {
    const file = write('kvreuse-refused.yaml', SHARED_FILE);
    const older = await resolveInProcess('router', 'error', file);
    expect(older.exitCode).toBe(2);
    expect(older.report).toMatchObject({ event: 'refused', code: 'UNKNOWN_SETTING' });
    expect(older.report['unknown']).toEqual([
      { name: 'transport', source: { source: 'file', path: file, line: 6 }, foreignGroup: 'transport' },
      {
        name: 'KVREUSE_TRANSPORT_ABANDON_TIMEOUT_MS',
        source: { source: 'env', variable: 'KVREUSE_TRANSPORT_ABANDON_TIMEOUT_MS' },
        foreignGroup: 'transport',
      },
    ]);
  });
});
