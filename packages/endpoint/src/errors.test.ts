import { describe, expect, it } from 'vitest';
import { PublicationRollbackError } from './endpoint-publication.js';
import {
  AllBlocksPinnedError,
  EndpointError,
  EndpointOptionError,
  MetricsPortError,
  PinMessageError,
  PinRefusedError,
  PinTimeoutError,
  PinTooLargeError,
  PullRefusedError,
  ReaderClosedError,
  SourceUnresponsiveError,
  UnknownReaderError,
} from './errors.js';
import { EndpointNotReadyError, EndpointStateError } from './lifecycle.js';
import { PushFailedError } from './push-side.js';

describe('endpoint errors', () => {
  it.each([
    [
      new EndpointOptionError('leaseMs', 0, 'a whole number of milliseconds ≥ 1'),
      'INVALID_ENDPOINT_OPTION',
      'endpoint option leaseMs = 0 is refused: a whole number of milliseconds ≥ 1',
    ],
    [
      new EndpointStateError('pull', 'created', ['ready']),
      'ILLEGAL_ENDPOINT_STATE',
      'pull is not allowed while the endpoint is created (only while ready)',
    ],
    [
      new EndpointNotReadyError('draining', 'drain({ deadlineMs: 100 })'),
      'ENDPOINT_NOT_READY',
      'the endpoint did not become ready: it is draining (drain({ deadlineMs: 100 }))',
    ],
    [
      new MetricsPortError('127.0.0.1', 9400, 'EADDRINUSE'),
      'METRICS_PORT_UNAVAILABLE',
      'cannot serve metrics on 127.0.0.1:9400: the port is in use (EADDRINUSE; endpoint.metrics_port, endpoint.metrics_host)',
    ],
    [
      new AllBlocksPinnedError(4),
      'ALL_BLOCKS_PINNED',
      'block pool has no slot to give: all 4 blocks are pinned by readers',
    ],
    [new PinMessageError('truncated'), 'INVALID_PIN_MESSAGE', 'invalid pin message: truncated'],
    [
      new PinTooLargeError(600, 400),
      'PIN_TOO_LARGE',
      'a pin of 600 blocks does not fit one pin message: at most 400 blocks per pin',
    ],
    [
      new PinRefusedError({ tpRank: 1, ppRank: 0 }, 'evicted'),
      'PIN_REFUSED',
      'source rank tp 1 pp 0 refused the pin: evicted',
    ],
    [
      new PullRefusedError('admission', 'source bank 3 is vram and no admission gate is installed'),
      'PULL_REFUSED',
      'pull refused (admission): source bank 3 is vram and no admission gate is installed',
    ],
    [
      new UnknownReaderError('prefill-0-tp0', 'no pin request came from it'),
      'UNKNOWN_READER',
      'cannot answer reader agent prefill-0-tp0: no pin request came from it',
    ],
    [
      new PushFailedError('decode-0', 'WRITE of block 2 failed: remote disconnect'),
      'PUSH_FAILED',
      'push to decode-0 failed: WRITE of block 2 failed: remote disconnect',
    ],
    [
      new PublicationRollbackError(
        new Error('inventory store is down'),
        new AggregateError([new Error('etcd unavailable')], 'the rank part was not withdrawn: etcd unavailable'),
      ),
      'PUBLICATION_NOT_ROLLED_BACK',
      'the publication failed (inventory store is down) and was not all given back: the rank part was not withdrawn: etcd unavailable',
    ],
    [
      new PinTimeoutError('release', { tpRank: 2, ppRank: 1 }, 500),
      'PIN_TIMEOUT',
      'source rank tp 2 pp 1 did not answer the release within 500 ms',
    ],
    [
      new ReaderClosedError('pin', { tpRank: 1, ppRank: 0 }),
      'READER_CLOSED',
      'this rank closed before source rank tp 1 pp 0 answered the pin',
    ],
    [
      new SourceUnresponsiveError('pin', { tpRank: 1, ppRank: 0 }, 'decode-tp1', 1500.4),
      'SOURCE_UNRESPONSIVE',
      'source rank tp 1 pp 0 stopped answering before it answered the pin: its agent decode-tp1 answered no heartbeat for 1500 ms',
    ],
    [
      new SourceUnresponsiveError('release', { tpRank: 1, ppRank: 0 }, 'decode-tp1', 0, 'disconnected'),
      'SOURCE_UNRESPONSIVE',
      'source rank tp 1 pp 0 stopped answering before it answered the release: its agent decode-tp1 lost its connection: its process died or its endpoint was closed',
    ],
    [
      new SourceUnresponsiveError('pin', { tpRank: 1, ppRank: 0 }, 'decode-tp1', 20, 'process-ended'),
      'SOURCE_UNRESPONSIVE',
      'source rank tp 1 pp 0 stopped answering before it answered the pin: its agent decode-tp1 is gone: its process ended',
    ],
  ])('%s carries its code and names the value', (error, code, message) => {
    expect(error).toBeInstanceOf(EndpointError);
    expect(error.code).toBe(code);
    expect(error.message).toBe(message);
    expect(error.name).toBe(error.constructor.name);
  });
});
