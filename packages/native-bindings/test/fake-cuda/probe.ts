// Runs with the fake CUDA driver of native/test/fake_cuda named by KVT_CUDA_LIBRARY (test/fake-cuda.test.ts):
// reports the vram capability, a vram allocation registered as what it is, and the refusals of memory that
// is not device memory of the named GPU. The fake isolates the facade above the driver; it is no GPU run.
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

const agent = await transport.createAgent({ name: agentName('fake-cuda'), backend: 'loopback' });
const allocation = agent.allocateVram(1, 1 << 20);
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
  otherGpu: refusal(() => agent.register({ address: allocation.address, bytes: 4096, kind: 'vram', device: 0 })),
  noSuchGpu: refusal(() => agent.allocateVram(7, 4096)),
};
await region.deregister();
await allocation.free();
await host.free();
await agent.close();
emit(report);
