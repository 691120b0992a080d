// Opens a veth pair and holds it: reports the namespaces' names, then exits on the parent's `exit`
// command with the pair still open (or is killed before).
import { emit, untilParentSays } from '../support/child.js';
import { openVethPair } from '../support/netns.js';

const pair = openVethPair();
emit({ event: 'opened', names: [pair.a.name, pair.b.name] });
await untilParentSays('exit');
process.exit(0);
