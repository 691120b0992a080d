// An engine of the sidecar command's test that adopts GPU memory, as its own process (its adoption waits for
// the answer on its thread): it sends an adopt of `vram` with a CUDA IPC handle of zeros to the sidecar at
// the socket path it is given, prints the refusal's reason as one JSON line, and exits.
import { codeOf } from '@kvreuse/errors';
import { loadTransport } from '@kvreuse/native-bindings';

const [path = ''] = process.argv.slice(2);
const geometry = {
  ...{ numLayers: 1, kvPlanes: 2, blockTokens: 16, numKvHeads: 1, headDim: 4 },
  ...{ dtype: 'bf16', bankLayout: 'fully-contiguous', headOrder: 'NHD' },
};
const layout = { workerId: 'cli-gpu-engine', geometry, blocks: 16, memory: 'vram', device: 0 };
const client = loadTransport().connectSidecar(path);
try {
  client.adopt(undefined, { ...layout, ipcHandle: Buffer.alloc(64).toString('base64') });
  process.stdout.write(`${JSON.stringify({ adopted: true })}\n`);
} catch (error) {
  if (codeOf(error) !== 'NOT_ALLOWED') throw error;
  const { reason } = JSON.parse((error as { detail: string }).detail) as { reason: string };
  process.stdout.write(`${JSON.stringify({ reason })}\n`);
}
client.close();
