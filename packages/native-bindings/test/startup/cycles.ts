// One process of the start-up stress (see stress.ts): `cycles` times over, two ucx agents are created,
// each allocates and registers a bank, the reader loads the source as a peer, reads the source's bank
// in 16 pieces, verifies every byte, and everything is closed again. Each cycle also leaves JavaScript
// garbage behind and forces a full collection while the new agents start (run with --expose-gc), so that
// V8's collector threads allocate, map and unmap memory alongside, as in a busy worker.
// A line per cycle tells the parent how far it got. Usage: cycles.ts <backend> <cycles>
import type { Backend } from '@kvreuse/native-bindings';
import { emit } from '../support/child.js';
import { findPatternMismatch, piecewiseDescriptors } from '../support/content.js';
import { openPair, readRequest } from '../support/pair.js';

const backend = process.argv[2] as Backend;
const cycles = Number(process.argv[3]);
if (!Number.isSafeInteger(cycles) || cycles < 1)
  throw new Error(`usage: cycles.ts <backend> <cycles> (got ${process.argv.slice(2).join(' ')})`);

const PIECES = 16;
const PIECE_BYTES = 64 * 1024;

let garbage: unknown[] = [];
const collect = globalThis.gc;
if (collect === undefined) throw new Error('cycles.ts needs node --expose-gc');

emit({ event: 'started', pid: process.pid });
for (let cycle = 1; cycle <= cycles; cycle++) {
  garbage = Array.from({ length: 50_000 }, (_, index) => ({ cycle, index, label: `cycle ${cycle} item ${index}` }));
  const pair = await openPair(backend, PIECES * PIECE_BYTES, cycle);
  collect();
  const operation = pair.reader.post(readRequest(pair, piecewiseDescriptors(PIECES, PIECE_BYTES)));
  const result = await operation.done;
  operation.release();
  const mismatch = findPatternMismatch(pair.readerBank.view(), cycle);
  await pair.close();
  if (result.bytesDone !== PIECES * PIECE_BYTES || mismatch !== -1) {
    throw new Error(`cycle ${cycle}: read ${result.bytesDone} bytes, first wrong byte at ${mismatch}`);
  }
  emit({ event: 'cycle', cycle, garbage: garbage.length });
}
emit({ event: 'done', cycles });
