// Runs with the fake CUDA driver of native/test/fake_cuda named by KVT_CUDA_LIBRARY (test/fake-cuda.test.ts):
// reports the vram capability, a vram allocation registered as what it is, and the refusals of memory that
// is not device memory of the named GPU. The fake isolates the facade above the driver; it is no GPU run.
// tools/gpu-check runs the same probe, bundled, on a GPU machine's driver with KVREUSE_PROBE_GPU=0.
import { buildTransferTemplate, type Geometry } from '@kvreuse/descriptors';
import { NativeTransportError, TransportUsageError } from '@kvreuse/native-bindings';
import { agentName, transport } from '../support/backends.js';
import { emit } from '../support/child.js';
import { closeRank, openRank, workerOf } from '../support/ranks.js';

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

const geometry: Geometry = {
  numLayers: 2,
  kvPlanes: 2,
  blockTokens: 16,
  numKvHeads: 2,
  headDim: 64,
  dtype: 'bf16',
  bankLayout: 'layer-separate',
  headOrder: 'HND',
};

/**
 * A template pull between vram banks of two loopback agents (TP 1 → TP 1, 4 banks of 4 blocks each), the
 * source's content copied up from the host (`Allocation.write`), then each side's block checksums by the
 * GPU's kernel: the bytes the gather moved, whether the sums agree, and whether the destination's blocks
 * changed from what they held before (the written content arrived, not zeros on both sides).
 */
async function templatePull(gpu: number): Promise<Record<string, unknown>> {
  const rank = (workerId: string, role: 'decode' | 'prefill') =>
    openRank({ workerId, role, geometry, tpRank: 0, tpSize: 1, blocks: 4, backend: 'loopback', gpu });
  const [source, destination] = [await rank('decode-0', 'decode'), await rank('prefill-0', 'prefill')];
  const template = buildTransferTemplate(workerOf([source]), workerOf([destination]));
  const handle = destination.agent.registerTemplate({
    peer: destination.agent.loadPeer(source.agent.metadata()),
    template,
    direction: 'read',
    localRegions: destination.regions,
    remoteRegions: source.regions.map((region) => region.id),
  });
  const [sourceBlocks, destinationBlocks] = [Uint32Array.from([3, 1]), Uint32Array.from([0, 2])];
  const content = Uint8Array.from({ length: source.allocation.bytes }, (_, i) => (i * 131 + 7) & 0xff);
  source.allocation.write(content);
  const destinationSums = () =>
    destination.agent.blockChecksums({
      template,
      side: 'destination',
      regions: destination.regions,
      blocks: destinationBlocks,
    });
  const before = destinationSums();
  const operation = destination.agent.postBlocks({ template: handle, sourceBlocks, destinationBlocks });
  const { bytesDone } = await operation.done;
  operation.release();
  handle.release();
  const sent = source.agent.blockChecksums({ template, side: 'source', regions: source.regions, blocks: sourceBlocks });
  const received = destinationSums();
  await closeRank(source);
  await closeRank(destination);
  const rowBytes = Array.from(template.rowBytes, (bytes, r) => Number(bytes) * (template.rows[r] as number));
  return {
    bytes: bytesDone,
    planned: 2 * rowBytes.reduce((sum, bytes) => sum + bytes, 0),
    checksumsAgree: sent.length === 2 && sent.every((sum, i) => sum === received[i]),
    contentArrived: received.every((sum, i) => sum !== before[i]),
  };
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
  writePastEnd: refusal(() => allocation.write(new Uint8Array(16), allocation.bytes - 8)),
  templatePull: await templatePull(gpu),
};
await region.deregister();
await allocation.free();
await host.free();
await agent.close();
emit(report);
