import { loadTransport } from '@kvreuse/native-bindings';

// No libraryPath: the library `npx kvreuse-build-native` built inside the installed package.
const transport = loadTransport();
const agent = await transport.createAgent({ name: 'pack-install', backend: 'loopback' });
const allocation = await agent.allocate(1 << 20);
allocation.view().fill(7);
const region = agent.register(allocation);
const registered = { bytes: region.bytes, liveRegistrations: agent.counters().liveRegistrations };
await region.deregister();
await allocation.free();
const closed = await agent.close();
console.log(JSON.stringify({ libraryPath: transport.libraryPath, backends: transport.capabilities().backends, registered, forced: closed.forced === undefined ? null : closed.forced.message }));
