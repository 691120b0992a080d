// The sidecar of the adoption tests, as its own process: an EngineSidecar at the socket path it is given,
// its adopted ranks on ucx publishing to the SQLite discovery file it is given. Each report becomes a line
// (`{ event: report.kind, ... }`), after a `listening` line. Commands on stdin: `{}` has it report a `state`
// line (engines served, and its own mappings and descriptors of engine memory, named "kvreuse-bank"
// by the test engine); `{"close": true}` closes it.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { openClusterSecret, openSqliteDiscovery } from '@kvreuse/discovery';
import { loadTransport } from '@kvreuse/native-bindings';
import { EngineSidecar } from '../../src/engine-sidecar.js';
import { defaultSettings } from '../support/settings.js';

const [discoveryPath = '', socketPath = ''] = process.argv.slice(2);
const store = openSqliteDiscovery(discoveryPath);
const write = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const sidecar = new EngineSidecar({
  transport: loadTransport(),
  path: socketPath,
  discovery: store,
  secret: openClusterSecret({ backend: 'sqlite', sqlitePath: discoveryPath, secretFile: '' }),
  settings: defaultSettings,
  host: 'test-host',
  onReport: (report) => write({ event: report.kind, ...report }),
});
write({ event: 'listening' });

/** What of the engine's memory this process still holds: mappings and open descriptors of its memfd. */
function borrowed() {
  const mappings = readFileSync('/proc/self/maps', 'utf8')
    .split('\n')
    .filter((line) => line.includes('memfd:kvreuse-bank')).length;
  const descriptors = readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).includes('memfd:kvreuse-bank');
    } catch {
      return false;
    }
  }).length;
  return { mappings, descriptors };
}

const commands = createInterface({ input: process.stdin });
const alive = setInterval(() => {}, 1 << 30);
commands.on('line', (line) => {
  const { close } = JSON.parse(line) as { close?: boolean };
  if (close !== true) {
    write({ event: 'state', engines: sidecar.engines.length, ...borrowed() });
    return;
  }
  void sidecar.close().then(async () => {
    await store.close();
    write({ event: 'closed' });
    commands.close();
    clearInterval(alive);
  });
});
