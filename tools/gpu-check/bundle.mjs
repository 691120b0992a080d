// Bundles the JavaScript of the GPU check's payload with esbuild, as the workspace already has it (through
// tsx): the facade's vram probe (packages/native-bindings/test/fake-cuda/probe.ts) as probe.mjs, the
// whole fetch between vram banks through the endpoints (fetch.ts) as fetch.mjs, and the kvreuse binary
// with its rank process (cli/dist/bin.js, cli/dist/rank-process.js) for the main job. The packages with
// native addons stay outside (prepare.sh copies them into the payload's node_modules).
//   node tools/gpu-check/bundle.mjs <repository root> <payload folder>
import { createRequire } from 'node:module';
import { join } from 'node:path';

const [root, payload] = process.argv.slice(2);
const fromTsx = createRequire(createRequire(join(root, 'package.json')).resolve('tsx'));
const esbuild = fromTsx('esbuild');
const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  conditions: ['@kvreuse/source'],
  external: ['koffi', 'better-sqlite3', 'zeromq', 'etcd3', 'cockatiel'],
  // The CommonJS packages inside call require(), which an ES module has only through createRequire.
  banner: {
    js: "import { createRequire as kvreuseRequire } from 'node:module'; const require = kvreuseRequire(import.meta.url);",
  },
  logLevel: 'warning',
};
await esbuild.build({
  ...common,
  entryPoints: [join(root, 'packages/native-bindings/test/fake-cuda/probe.ts')],
  outfile: join(payload, 'probe.mjs'),
});
await esbuild.build({
  ...common,
  entryPoints: [join(root, 'tools/gpu-check/fetch.ts')],
  outfile: join(payload, 'fetch.mjs'),
});
// The binary finds its package.json, the example settings and the built-in profiles by relative URLs:
// prepare.sh lays them out around cli/dist as in the packages (cli/package.json, examples/, cli/profiles/).
await esbuild.build({
  ...common,
  entryPoints: {
    bin: join(root, 'packages/cli/src/bin.ts'),
    'rank-process': join(root, 'packages/cli/src/demo/rank-process.ts'),
  },
  outdir: join(payload, 'cli/dist'),
});
