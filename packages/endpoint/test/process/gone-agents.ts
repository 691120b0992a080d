// Agents of a process that is gone by the time a reader loads them: a loopback agent and, where UCX is
// built, a ucx one. Prints their names and metadata as one JSON line, closes them and exits.
import { type Backend, loadTransport } from '@kvreuse/native-bindings';

const transport = loadTransport();

const backends: Backend[] = transport.capabilities().backends.includes('ucx') ? ['loopback', 'ucx'] : ['loopback'];
const agents = await Promise.all(
  backends.map((backend) => transport.createAgent({ name: `gone-${backend}-${process.pid}`, backend })),
);
process.stdout.write(
  `${JSON.stringify(Object.fromEntries(agents.map((agent) => [agent.backend, { name: agent.name, metadata: agent.metadata().toString('base64') }])))}\n`,
);
for (const agent of agents) await agent.close();
