// Bundles the facade's vram probe (packages/native-bindings/test/fake-cuda/probe.ts) into one ES module for
// the GPU check's payload, with esbuild as the workspace already has it (through tsx); koffi stays outside
// (its native addon travels beside the bundle).
//   node tools/gpu-check/bundle.mjs <repository root> <output file>
import { createRequire } from 'node:module';
import { join } from 'node:path';

const [root, outfile] = process.argv.slice(2);
const fromTsx = createRequire(createRequire(join(root, 'package.json')).resolve('tsx'));
const esbuild = fromTsx('esbuild');
await esbuild.build({
  entryPoints: [join(root, 'packages/native-bindings/test/fake-cuda/probe.ts')],
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  conditions: ['@kvreuse/source'],
  external: ['koffi'],
  outfile,
  logLevel: 'warning',
});
