import { loadTransport } from '@kvreuse/native-bindings';

// No libraryPath: the prebuilt library of the platform package npm installed for this machine.
const transport = loadTransport();
const source = await transport.createAgent({ name: 'pack-install-source', backend: 'loopback' });
const reader = await transport.createAgent({ name: 'pack-install-reader', backend: 'loopback' });
const sourceBank = await source.allocate(1 << 20);
sourceBank.view().fill(7);
const sourceRegion = source.register(sourceBank);
const readerBank = await reader.allocate(1 << 20);
const readerRegion = reader.register(readerBank);
const peer = reader.loadPeer(source.metadata());
const operation = reader.post({
  direction: 'read',
  peer,
  descriptors: {
    sourceBank: new Uint32Array(1),
    sourceOffset: new BigUint64Array(1),
    destinationBank: new Uint32Array(1),
    destinationOffset: new BigUint64Array(1),
    length: BigUint64Array.of(1n << 20n),
  },
  localRegions: [readerRegion],
  remoteRegions: [peer.regions()[0]!.id],
});
const { bytesDone } = await operation.done;
operation.release();
const read = { bytesDone: Number(bytesDone), sevens: readerBank.view().filter((byte) => byte === 7).length };
peer.unload();
await readerRegion.deregister();
await sourceRegion.deregister();
await readerBank.free();
await sourceBank.free();
await reader.close();
const closed = await source.close();
console.log(
  JSON.stringify({
    libraryPath: transport.libraryPath,
    backends: transport.capabilities().backends,
    read,
    forced: closed.forced === undefined ? null : closed.forced.message,
  }),
);
