// Posts one read whose completion is held for a while, and then has nothing else to do: the process
// must stay alive until the completion arrives (the wake-up socket is ref'd while work is pending)
// and exit by itself afterwards although the agents are still open (it is unref'd when idle).
import type { Backend } from '@kvreuse/native-bindings';
import { emit } from '../support/child.js';
import { piecewiseDescriptors } from '../support/content.js';
import { openPair, readRequest } from '../support/pair.js';

const pair = await openPair((process.argv[2] ?? 'loopback') as Backend, 4096, 9);
pair.reader.faults.delayCompletions(300);
const operation = pair.reader.post(readRequest(pair, piecewiseDescriptors(1, 4096)));
void operation.done.then((result) => {
  operation.release();
  emit({ event: 'completed', bytesDone: result.bytesDone });
});
