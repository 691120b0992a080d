// Runs with the fake CUDA driver of native/test/fake_cuda named by KVT_CUDA_LIBRARY (test/fake-cuda.test.ts):
// reports the vram capability, a vram allocation registered as what it is, and the refusals of memory that
// is not device memory of the named GPU. The fake isolates the facade above the driver; it is no GPU run.
// tools/gpu-check runs the same probe, bundled, on a GPU machine's driver with KVREUSE_PROBE_GPU=0.
import { NativeTransportError, TransportUsageError } from '@kvreuse/native-bindings';
import { agentName, transport } from '../support/backends.js';
import { emit } from '../support/child.js';

function refusal(action: () => unknown): Record<string, unknown> {
  try {
    action();
    return { refused: false };
  } catch (error) {
    if (error instanceof NativeTransportError) return { code: error.code, detail: error.detail };
    if (error instanceof TransportUsageError) return { code: error.code };
    return { other: String(error) };
  }
}

/** The GPU to allocate on (the fake's second of two by default); registering as the other one is refused. */
const gpu = Number(process.env['KVREUSE_PROBE_GPU'] ?? '1');
const otherGpu = gpu === 0 ? 1 : 0;
const agent = await transport.createAgent({ name: agentName('fake-cuda'), backend: 'loopback' });
const allocation = agent.allocateVram(gpu, 1 << 20);
const region = agent.register(allocation);
const info = { kind: region.kind, device: region.device, bytes: region.bytes };
const host = await agent.allocate(4096);
const report = {
  event: 'report',
  vram: transport.capabilities().vram,
  allocation: { kind: allocation.kind, device: allocation.device },
  region: info,
  view: refusal(() => allocation.view()),
  hostAsVram: refusal(() => agent.register({ address: host.address, bytes: host.bytes, kind: 'vram' })),
  otherGpu: refusal(() => agent.register({ address: allocation.address, bytes: 4096, kind: 'vram', device: otherGpu })),
  noSuchGpu: refusal(() => agent.allocateVram(999, 4096)),
};
await region.deregister();
await allocation.free();
await host.free();
await agent.close();
emit(report);
