// A ReuseEndpoint's options, and their checks: each refusal names the option and what it must be.
import type { SettingsOf } from '@kvreuse/config';
import type { RankId } from '@kvreuse/descriptors';
import { ClusterSecret, type DiscoveryStore, type discoveryGroup, type ReadinessGate } from '@kvreuse/discovery';
import type { Clock, drainGroup, WaitForReaders } from '@kvreuse/drain';
import type { Agent, transportGroup } from '@kvreuse/native-bindings';
import type { Bank, WorkerIdentity } from '@kvreuse/registry';
import type { TransferCalibration } from '@kvreuse/router';
import type { RankBankBytes } from './block-checksum.js';
import { EndpointOptionError } from './errors.js';
import type { EndpointMetrics } from './metrics.js';
import { verifyModes } from './pull-request.js';
import type { endpointGroup } from './settings.js';
import type { ServeOptions } from './source-side.js';

export interface ReuseEndpointOptions {
  /** This rank's native agent, started (`await transport.createAgent(...)`); the endpoint closes it at shutdown. */
  readonly agent: Agent;
  readonly discovery: DiscoveryStore;
  /**
   * The cluster secret (`openClusterSecret(settings.discovery)`): this rank's published transport metadata
   * is signed under it, and a peer's is loaded only when signed under it.
   */
  readonly secret: ClusterSecret;
  readonly worker: WorkerIdentity;
  readonly rank: RankId;
  /** This rank's banks, adopted and not yet registered, in the order the rank part lists them. */
  readonly banks: readonly Bank[];
  /**
   * The resolved `transport` and `discovery` settings (deadlines, the abandon timeout, the lease TTL),
   * `drain` for a pull's default shortfall policy (`recompute` without it) and `endpoint` for its
   * default verification (`endpoint.verify`; `full` without it) and its metrics listener: with
   * `endpoint.metricsPort` set (not 0), `register()` first serves `metrics` at `GET /metrics` on
   * `endpoint.metricsHost` and that port, until `close()`.
   */
  readonly settings: SettingsOf<[typeof transportGroup, typeof discoveryGroup]> &
    Partial<SettingsOf<[typeof drainGroup, typeof endpointGroup]>>;
  /**
   * This rank's bank bytes, indexed by bank number (e.g. `allocation.view()` of each bank): what a
   * serving rank checksums for its readers and what a pulling rank verifies. Required with `serve`, and
   * for a pull that verifies.
   */
  readonly bankBytes?: RankBankBytes;
  /**
   * Makes this rank a source: once published it answers pin requests arriving on its agent's
   * notifications (a `PinServer` over `serve.adapter`), publishes its retained inventory when
   * `serve.inventory` is given, and its drain withdraws the inventory with its rank part, refuses new
   * pins and waits for the held ones (released, or lapsed past their lease) before it drains its own
   * operations, deregisters and hands back.
   */
  readonly serve?: ServeOptions;
  /** Readiness gates of this worker, and the profile-admission gate (required for `vram` banks, also for pulling from or into them). */
  readonly gates?: readonly ReadinessGate[];
  readonly admissionGate?: ReadinessGate;
  /** Waits for readers' pins during a drain when this rank does not `serve` (then its pin server waits); without either, no reader is waited for. */
  readonly waitForReaders?: WaitForReaders;
  /** Withdraws this worker's retained inventory during a drain, right after its rank part. */
  readonly withdrawInventory?: () => Promise<unknown>;
  /**
   * The calibration of a router in this process: every pull whose receipt prices the blocks it
   * committed (`calibrationSample`) is recorded there, so the router's next estimates follow what pulls measure.
   */
  readonly calibration?: Pick<TransferCalibration, 'record'>;
  /** Required when `settings.endpoint.metricsPort` is set: what the listener serves. */
  readonly metrics?: EndpointMetrics;
  /**
   * Where this rank runs, published in its rank part so routers tell same-host sources from network ones. By
   * default `thisHost()`: the kernel's boot id and this process's IPC and pid namespaces, so that only processes
   * that map each other's memory are same-host (pods on one node are not); give a name of your own (1–255
   * characters) or `null` to publish none.
   */
  readonly host?: string | null;
  readonly keyPrefix?: string;
  readonly clock?: Clock;
}

const optionalFunctions = ['waitForReaders', 'withdrawInventory'] as const;

/** The options a serving endpoint needs: its pin adapter and lease, its inventory, and the bytes its readers checksum. */
function checkServeOptions(options: ReuseEndpointOptions, serve: ServeOptions): void {
  if (typeof serve !== 'object' || serve === null || typeof serve.adapter !== 'object' || serve.adapter === null) {
    throw new EndpointOptionError('serve', serve, "{ adapter, leaseMs?, inventory? } with the framework's PinAdapter");
  }
  if (
    serve.leaseMs !== undefined &&
    (!Number.isSafeInteger(serve.leaseMs) || serve.leaseMs < 1 || serve.leaseMs > 0xffffffff)
  ) {
    throw new EndpointOptionError('serve.leaseMs', serve.leaseMs, 'a whole number of milliseconds, 1 to 2^32 - 1');
  }
  const { inventory } = serve;
  if (
    inventory !== undefined &&
    (typeof inventory !== 'object' ||
      inventory === null ||
      !['gpu', 'host'].includes(inventory.tier) ||
      typeof inventory.retained !== 'function' ||
      !Number.isSafeInteger(inventory.ttlMs) ||
      inventory.ttlMs < 1 ||
      (inventory.prefix !== undefined && (typeof inventory.prefix !== 'string' || inventory.prefix.length === 0)))
  ) {
    throw new EndpointOptionError(
      'serve.inventory',
      inventory,
      "{ tier: 'gpu' | 'host', retained: () => bigint[], ttlMs: whole milliseconds ≥ 1, prefix?: a non-empty string }",
    );
  }
  if (options.waitForReaders !== undefined)
    throw new EndpointOptionError(
      'waitForReaders',
      options.waitForReaders,
      'left out when the endpoint serves: its pin server waits for the readers',
    );
  if (!Array.isArray(options.bankBytes))
    throw new EndpointOptionError(
      'bankBytes',
      options.bankBytes,
      "this rank's bank bytes, indexed by bank number: a serving rank checksums what its readers read",
    );
}

/**
 * The endpoint's own copy of checked options: the data it reads after the checks (its identity and rank,
 * its worker's geometry, the settings groups, the lists of banks, bank bytes and gates, `serve` and its inventory) is copied, so
 * that the caller changing its objects later changes nothing the endpoint was given. The agent, store,
 * secret, banks, adapter and functions are the caller's own, shared by design.
 */
export function ownedOptions(options: ReuseEndpointOptions): ReuseEndpointOptions {
  const { settings, serve, bankBytes, gates } = options;
  const groups = Object.fromEntries(Object.entries(settings).map(([group, values]) => [group, { ...values }]));
  return {
    ...options,
    worker: { ...options.worker, geometry: { ...options.worker.geometry } },
    rank: { ...options.rank },
    banks: [...options.banks],
    settings: groups as unknown as ReuseEndpointOptions['settings'],
    ...(bankBytes === undefined ? {} : { bankBytes: [...bankBytes] }),
    ...(gates === undefined ? {} : { gates: [...gates] }),
    ...(serve === undefined
      ? {}
      : { serve: { ...serve, ...(serve.inventory === undefined ? {} : { inventory: { ...serve.inventory } }) } }),
  };
}

/** `EndpointOptionError` naming `option` unless `value` is left out or a positive number of milliseconds. */
export function checkTimeoutMs(option: string, value: unknown): void {
  if (value !== undefined && !(typeof value === 'number' && Number.isFinite(value) && value > 0))
    throw new EndpointOptionError(option, value, 'a positive number of milliseconds');
}

/** `register()`'s options, checked and read once: only its timeout and its signal (`EndpointOptionError` naming the one refused). */
export function checkedRegisterOptions(options: { readonly timeoutMs?: number; readonly signal?: AbortSignal }): {
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
} {
  if (typeof options !== 'object' || options === null)
    throw new EndpointOptionError('options', options, "register()'s options: { timeoutMs?, signal? }");
  const { timeoutMs, signal } = options;
  checkTimeoutMs('timeoutMs', timeoutMs);
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new EndpointOptionError('signal', signal, 'an AbortSignal');
  return { ...(timeoutMs === undefined ? {} : { timeoutMs }), ...(signal === undefined ? {} : { signal }) };
}

/**
 * The deadline a `drain()` (which requires one) or a `close()` (undefined: the default) is given, read once;
 * `EndpointOptionError` unless its options are an object and the deadline a whole number of milliseconds, at least 0.
 */
export function deadlineOf(options: unknown, call: 'drain'): number;
export function deadlineOf(options: unknown, call: 'close'): number | undefined;
export function deadlineOf(options: unknown, call: 'drain' | 'close'): number | undefined {
  if (typeof options !== 'object' || options === null)
    throw new EndpointOptionError(
      'options',
      options,
      `${call}()'s options: { deadlineMs${call === 'close' ? '?' : ''} }`,
    );
  const { deadlineMs } = options as { readonly deadlineMs?: unknown };
  if (deadlineMs === undefined && call === 'close') return undefined;
  if (Number.isSafeInteger(deadlineMs) && (deadlineMs as number) >= 0) return deadlineMs as number;
  throw new EndpointOptionError('deadlineMs', deadlineMs, 'a whole number of milliseconds, at least 0');
}

/** Refuses options an endpoint cannot run with (`EndpointOptionError`, naming the option); changes nothing. */
export function checkOptions(options: ReuseEndpointOptions): void {
  if (typeof options !== 'object' || options === null)
    throw new EndpointOptionError('options', options, 'an options object');
  for (const name of ['agent', 'discovery', 'worker', 'rank', 'settings'] as const) {
    if (typeof options[name] !== 'object' || options[name] === null)
      throw new EndpointOptionError(name, options[name], 'an object');
  }
  if (!(options.secret instanceof ClusterSecret))
    throw new EndpointOptionError(
      'secret',
      options.secret,
      'the ClusterSecret openClusterSecret(settings.discovery) returns',
    );
  if (!Array.isArray(options.banks) || options.banks.length === 0)
    throw new EndpointOptionError('banks', options.banks, "a non-empty array of this rank's banks");
  if (options.calibration !== undefined && typeof options.calibration?.record !== 'function') {
    throw new EndpointOptionError(
      'calibration',
      options.calibration,
      "the router's TransferCalibration (its record(receipt))",
    );
  }
  for (const name of optionalFunctions) {
    if (options[name] !== undefined && typeof options[name] !== 'function')
      throw new EndpointOptionError(name, options[name], 'a function');
  }
  if (options.serve !== undefined) checkServeOptions(options, options.serve);
  const { transport, discovery, endpoint } = options.settings;
  if (typeof transport !== 'object' || transport === null)
    throw new EndpointOptionError('settings.transport', transport, 'the resolved transport settings');
  if (typeof discovery !== 'object' || discovery === null)
    throw new EndpointOptionError('settings.discovery', discovery, 'the resolved discovery settings');
  if (endpoint !== undefined) {
    if (typeof endpoint !== 'object' || endpoint === null)
      throw new EndpointOptionError('settings.endpoint', endpoint, 'the resolved endpoint settings');
    if (!verifyModes.includes(endpoint.verify))
      throw new EndpointOptionError('settings.endpoint.verify', endpoint.verify, "'full', 'sampled' or 'off'");
    if (endpoint.metricsPort !== 0 && options.metrics === undefined) {
      throw new EndpointOptionError(
        'metrics',
        options.metrics,
        `an EndpointMetrics for the listener: settings.endpoint.metricsPort is ${endpoint.metricsPort}`,
      );
    }
  }
}
