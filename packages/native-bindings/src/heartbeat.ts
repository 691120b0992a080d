import type { SettingsOf } from '@kvreuse/config';
import type { transportGroup } from './settings.js';
import { InvalidArgumentError } from './errors.js';
import type { AgentContext } from './handles.js';
import { check } from './library.js';
import type { Peer } from './peer.js';
import { PolledQueue } from './polled-queue.js';

/**
 * How an agent probes its peers (the `transport.heartbeat*` settings; `settings.transport` fits): every
 * `heartbeatIntervalMs`, each peer with transfers in flight or watched (`peer.watch()`) is probed; one that
 * answers no probe for `heartbeatMisses` intervals in a row is reported `peer-unresponsive`.
 */
export type HeartbeatOptions = Pick<
  SettingsOf<[typeof transportGroup]>['transport'],
  'heartbeatIntervalMs' | 'heartbeatMisses'
>;

/** The native library's bounds (KVT_HEARTBEAT_*), the same as the settings'. */
export const heartbeatLimits = { minIntervalMs: 10, maxIntervalMs: 60_000, minMisses: 1, maxMisses: 1000 } as const;

/** Checks `heartbeat` before any native call; throws InvalidArgumentError naming the field. */
export function validateHeartbeat(heartbeat: unknown): HeartbeatOptions {
  if (typeof heartbeat !== 'object' || heartbeat === null) {
    throw new InvalidArgumentError(
      'heartbeat',
      heartbeat,
      'must be an object { heartbeatIntervalMs, heartbeatMisses }',
    );
  }
  const { heartbeatIntervalMs, heartbeatMisses } = heartbeat as Record<string, unknown>;
  const { minIntervalMs, maxIntervalMs, minMisses, maxMisses } = heartbeatLimits;
  if (!isIntegerIn(heartbeatIntervalMs, minIntervalMs, maxIntervalMs)) {
    throw new InvalidArgumentError(
      'heartbeat.heartbeatIntervalMs',
      heartbeatIntervalMs,
      `must be an integer ${minIntervalMs}–${maxIntervalMs}`,
    );
  }
  if (!isIntegerIn(heartbeatMisses, minMisses, maxMisses)) {
    throw new InvalidArgumentError(
      'heartbeat.heartbeatMisses',
      heartbeatMisses,
      `must be an integer ${minMisses}–${maxMisses}`,
    );
  }
  return { heartbeatIntervalMs, heartbeatMisses };
}

function isIntegerIn(value: unknown, min: number, max: number): value is number {
  return Number.isInteger(value) && (value as number) >= min && (value as number) <= max;
}

/**
 * Why a peer was reported. `peer-unresponsive`: `silent` (it answered no probe for the agent's miss count of
 * intervals), `disconnected` (the transport failed its connection: its process died or its endpoint was
 * closed), `process-ended` (its process ended, seen through its pidfd: a peer on this host in this pid
 * namespace). `peer-responsive`: `answered` (it answered a probe again), `reloaded` (its metadata was loaded
 * again: a new connection, judged afresh).
 */
export type PeerEventCause = 'silent' | 'disconnected' | 'process-ended' | 'answered' | 'reloaded';

/**
 * A heartbeat report about a peer. `peer-unresponsive`: it stopped answering (`cause` says how); nothing else
 * changed (its transfers keep going, it stays `ready`): cancel them, quarantine and route around it as the
 * layer above sees fit. `peer-responsive`: it answered again, or a reload replaced the connection judged.
 * Each transition is reported once, in order. `silentMs` is how long the peer had answered nothing, counted
 * from the first probe it left unanswered: when it was reported unresponsive, or until its answer arrived
 * (0 when no probe awaited an answer).
 */
export interface PeerEvent {
  readonly type: 'peer-unresponsive' | 'peer-responsive';
  readonly cause: PeerEventCause;
  readonly peer: Peer;
  readonly peerName: string;
  readonly silentMs: number;
}

/** The native KVT_PEER_EVENT_* kinds: odd ones make the peer unresponsive. */
const causeOfKind: Readonly<Record<number, PeerEventCause>> = {
  1: 'silent',
  2: 'answered',
  3: 'disconnected',
  4: 'reloaded',
  5: 'process-ended',
};
const POLL_CAPACITY = 256;

/** An agent's heartbeat reports: drained from the native library on every wake-up, handed out in order. */
export class PeerEvents extends PolledQueue<PeerEvent> {
  readonly #agent: AgentContext;
  readonly #peerOf: (id: number) => Peer | undefined;
  readonly #peerIds = new Uint32Array(POLL_CAPACITY);
  readonly #kinds = new Uint32Array(POLL_CAPACITY);
  readonly #silences = new BigUint64Array(POLL_CAPACITY);
  readonly #count = new Uint32Array(1);

  constructor(agent: AgentContext, peerOf: (id: number) => Peer | undefined, onWaitersChanged: () => void) {
    super(onWaitersChanged);
    this.#agent = agent;
    this.#peerOf = peerOf;
  }

  protected fill(push: (event: PeerEvent) => void): void {
    const { library, id } = this.#agent;
    for (;;) {
      check(
        library,
        'kvt_peer_events_poll',
        library.api.kvt_peer_events_poll(id, POLL_CAPACITY, this.#peerIds, this.#kinds, this.#silences, this.#count),
      );
      const count = this.#count[0] ?? 0;
      for (let i = 0; i < count; i++) {
        const peer = this.#peerOf(this.#peerIds[i] ?? 0);
        if (peer === undefined) continue;
        const kind = this.#kinds[i] ?? 0;
        const unresponsive = kind % 2 === 1;
        push({
          type: unresponsive ? 'peer-unresponsive' : 'peer-responsive',
          cause: causeOfKind[kind] ?? (unresponsive ? 'silent' : 'answered'),
          peer,
          peerName: peer.name,
          silentMs: Number(this.#silences[i]),
        });
      }
      if (count < POLL_CAPACITY) break;
    }
  }
}
