// The endpoint's error base and the typed errors several of its modules share (the lifecycle's and the receipt's live
// with them). Each carries a stable `code` and names what was refused.
import { describeValue, KvreuseError } from '@kvreuse/errors';
import type { RankId } from '@kvreuse/descriptors';
import type { PeerEventCause } from '@kvreuse/native-bindings';

export type EndpointErrorCode =
  | 'INVALID_ENDPOINT_OPTION'
  | 'ILLEGAL_ENDPOINT_STATE'
  | 'ENDPOINT_NOT_READY'
  | 'METRICS_PORT_UNAVAILABLE'
  | 'ALL_BLOCKS_PINNED'
  | 'INVALID_PIN_MESSAGE'
  | 'PIN_TOO_LARGE'
  | 'PIN_REFUSED'
  | 'PIN_TIMEOUT'
  | 'READER_CLOSED'
  | 'SOURCE_UNRESPONSIVE'
  | 'PULL_SHORTFALL'
  | 'PULL_REFUSED'
  | 'PUSH_FAILED'
  | 'PUBLICATION_NOT_ROLLED_BACK'
  | 'UNKNOWN_READER';

export abstract class EndpointError extends KvreuseError<EndpointErrorCode> {}

/** An option of the endpoint or one of its parts that is missing, of the wrong shape or out of range. Nothing was started. */
export class EndpointOptionError extends EndpointError {
  readonly code = 'INVALID_ENDPOINT_OPTION';
  constructor(
    readonly option: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`endpoint option ${option} = ${describeValue(value)} is refused: ${rule}`);
  }
}

/** The metrics listener could not listen on `host:port`; `systemCode` is the system's (`EADDRINUSE` for a port in use). */
export class MetricsPortError extends EndpointError {
  readonly code = 'METRICS_PORT_UNAVAILABLE';
  constructor(
    readonly host: string,
    readonly port: number,
    readonly systemCode: string,
    options?: ErrorOptions,
  ) {
    super(
      `cannot serve metrics on ${host}:${port}: ${systemCode === 'EADDRINUSE' ? 'the port is in use' : 'the address is refused'} (${systemCode}; endpoint.metrics_port, endpoint.metrics_host)`,
      options,
    );
  }
}

/**
 * Why a pull was refused before anything was pinned or posted: this endpoint is not ready
 * (`not-ready`), the source worker is not ready in discovery or is another incarnation or epoch than the
 * hint names (`source-not-ready`), the two workers' rank parts are not compatible (`incompatible`),
 * a `vram` bank takes part without the profile admission gate passing (`admission`), or a source rank's
 * transport metadata is refused (`metadata-refused`): before loading it when unsigned, signed with another
 * cluster secret or for another rank part (the `TransportMetadataRefusedError` is the cause), or by the
 * native layer loading it, when it is for another backend, another metadata format, older than the
 * generation loaded or malformed (the `NativeTransportError` is the cause: `MISMATCH` or `INVALID_PARAM`),
 * or a source rank's agent cannot be reached although discovery still lists it (`source-unreachable`; the
 * `NativeTransportError` is the cause): its process or agent is gone and its lease has not lapsed yet, UCX
 * finds no path to it (`REMOTE_DISCONNECT`), or it is a loopback agent of another process (`NOT_SUPPORTED`).
 * Other native failures loading a source's peer are this agent's own and are thrown as they are.
 */
export type PullRefusal =
  'not-ready' | 'source-not-ready' | 'incompatible' | 'admission' | 'metadata-refused' | 'source-unreachable';

/**
 * A pull refused before anything was pinned or posted; `reason` is the stable code, the message says it
 * with the values, and `cause` is the error behind it where there is one.
 */
export class PullRefusedError extends EndpointError {
  readonly code = 'PULL_REFUSED';
  constructor(
    readonly reason: PullRefusal,
    readonly detail: string,
    options?: ErrorOptions,
  ) {
    super(`pull refused (${reason}): ${detail}`, options);
  }
}

/** A pin message from a reader agent the source cannot answer: `why` says what discovery lacked. The message is left unanswered. */
export class UnknownReaderError extends EndpointError {
  readonly code = 'UNKNOWN_READER';
  constructor(
    readonly agentName: string,
    readonly why: string,
  ) {
    super(`cannot answer reader agent ${agentName}: ${why}`);
  }
}

/**
 * The block pool needed a slot and every block in it is pinned by readers or allocated and not yet committed
 * (`uncommitted` of them): nothing may be evicted. Nothing was committed.
 */
export class AllBlocksPinnedError extends EndpointError {
  readonly code = 'ALL_BLOCKS_PINNED';
  constructor(
    readonly slotCount: number,
    readonly uncommitted = 0,
  ) {
    super(`block pool has no slot to give: ${takenSlots(slotCount, uncommitted)}`);
  }
}

function takenSlots(slotCount: number, uncommitted: number): string {
  if (uncommitted === 0) return `all ${slotCount} blocks are pinned by readers`;
  if (uncommitted === slotCount) return `all ${slotCount} blocks are allocated and not yet committed`;
  return `all ${slotCount} blocks are pinned by readers (${slotCount - uncommitted}) or allocated and not yet committed (${uncommitted})`;
}

/** Bytes that are not a pin message of a version this build reads; `problem` says what is wrong. */
export class PinMessageError extends EndpointError {
  readonly code = 'INVALID_PIN_MESSAGE';
  constructor(readonly problem: string) {
    super(`invalid pin message: ${problem}`);
  }
}

/** A pin that names more blocks than one notification can carry. Nothing was sent. */
export class PinTooLargeError extends EndpointError {
  readonly code = 'PIN_TOO_LARGE';
  constructor(
    readonly blocks: number,
    readonly limitBlocks: number,
  ) {
    super(`a pin of ${blocks} blocks does not fit one pin message: at most ${limitBlocks} blocks per pin`);
  }
}

/** The source rank refused a pin; `reason` is the source's refusal code. */
export class PinRefusedError extends EndpointError {
  readonly code = 'PIN_REFUSED';
  constructor(
    readonly sourceRank: RankId,
    readonly reason: string,
  ) {
    super(`source rank ${describeRank(sourceRank)} refused the pin: ${reason}`);
  }
}

/** The source rank did not answer a pin request, renewal or release in time. */
export class PinTimeoutError extends EndpointError {
  readonly code = 'PIN_TIMEOUT';
  constructor(
    readonly operation: 'pin' | 'release',
    readonly sourceRank: RankId,
    readonly timeoutMs: number,
  ) {
    super(`source rank ${describeRank(sourceRank)} did not answer the ${operation} within ${timeoutMs} ms`);
  }
}

/**
 * This rank closed (`ReuseEndpoint.close()`) while a pin request or release awaited its source's answer, or
 * before the pin was asked for: nothing more is sent, and the source's lease lapses a pin it granted.
 */
export class ReaderClosedError extends EndpointError {
  readonly code = 'READER_CLOSED';
  constructor(
    readonly operation: 'pin' | 'release',
    readonly sourceRank: RankId,
  ) {
    super(`this rank closed before source rank ${describeRank(sourceRank)} answered the ${operation}`);
  }
}

/**
 * The source rank's agent stopped answering the heartbeat while a pin request or release awaited its
 * answer, or had stopped (and not answered since) when the pin was asked for: the request ended at once,
 * not at its timeout. `peerEventCause` says how (the heartbeat report's cause: `silent`, `disconnected`,
 * `process-ended`). `reason` is the recompute reason a pull reports.
 */
export class SourceUnresponsiveError extends EndpointError {
  readonly code = 'SOURCE_UNRESPONSIVE';
  readonly reason = 'source-unresponsive';
  constructor(
    readonly operation: 'pin' | 'release',
    readonly sourceRank: RankId,
    readonly peerName: string,
    readonly silentMs: number,
    readonly peerEventCause: PeerEventCause = 'silent',
  ) {
    super(
      `source rank ${describeRank(sourceRank)} stopped answering before it answered the ${operation}: its agent ${peerName} ${describeUnresponsive(peerEventCause, silentMs)}`,
    );
  }
}

/** What a `peer-unresponsive` report says of the peer's agent, as errors and pin losses name it. */
export function describeUnresponsive(cause: PeerEventCause, silentMs: number): string {
  if (cause === 'disconnected') return 'lost its connection: its process died or its endpoint was closed';
  if (cause === 'process-ended') return 'is gone: its process ended';
  return `answered no heartbeat for ${Math.round(silentMs)} ms`;
}

/** A rank as errors and losses name it: `tp 1 pp 0`. */
export function describeRank(rank: RankId): string {
  return `tp ${rank.tpRank} pp ${rank.ppRank}`;
}
