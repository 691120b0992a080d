import { defineSettings } from '@kvreuse/config';
import { loadTransport, transportGroup } from '@kvreuse/native-bindings';
import { DrainController, OperationLedger, PeerBook } from '@kvreuse/drain';

const { settings } = defineSettings([transportGroup]).resolve({ env: {}, argv: [] });
const agent = await loadTransport().createAgent({ name: 'drain-user', backend: 'loopback' });
const ledger = new OperationLedger({ agent, peers: new PeerBook(), timeouts: settings.transport });
const controller = new DrainController({ ledger, agent, shutdownDeadlineMs: settings.transport.shutdownDeadlineMs });
const report = await controller.drain({ deadlineMs: 2_000 });
console.log(
  JSON.stringify({ steps: report.steps, completed: report.completed, banksReturned: report.banksReturned.length }),
);
