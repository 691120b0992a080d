// One rank of the demo's workers: a native agent and a ReuseEndpoint opened over it (kvreuse-owned banks
// laid out for Qwen3-0.6B, registered, the rank part published to discovery), and a BlockPool (the
// reference pin adapter) standing in for the serving framework's block table. A decode rank serves pins
// on what it retains (`serve`) and announces it as the worker's inventory; the prefill rank hands turn 1
// off with the endpoint's `push` and pulls turn 2's prefix back (`pull`). Given a metrics port, the
// rank's endpoint serves its metrics there until it shuts down.
import type { Settings } from '../settings/all-settings.js';
import { type Geometry, type RankPart, referenceGeometries } from '@kvreuse/descriptors';
import {
  BlockPool,
  EndpointMetrics,
  type EndpointShutdownResult,
  type HeldPin,
  ReuseEndpoint,
} from '@kvreuse/endpoint';
import { type Agent, type Backend, loadTransport, type MemoryKind } from '@kvreuse/native-bindings';
import { type DiscoveryStore, openDiscovery } from '@kvreuse/discovery';
import { blockHashFromHex } from '@kvreuse/inventory';
import { keepCleanupFailures } from '@kvreuse/errors';
import { releaseBanks, releaseRank } from '@kvreuse/registry';
import { DemoMessageError } from '../errors.js';
import { startPublishing } from '../publishing.js';
import { CrashOnPin } from './crash-on-pin.js';
import { runEveryStep } from './every-step.js';
import { handOff } from './hand-off.js';
import { holdsBlockContent, writeBlockContent } from './kv-content.js';
import { pullAndRecompute } from './pull.js';
import { reportQuarantines } from './quarantine-report.js';
import { allocateVramBanks, type VramBanks, vramAdmissionGate } from './vram-banks.js';
import { hintOf, type RankCommand, type RankMessage, type RankRole } from './rank-messages.js';

export interface DemoRankOptions {
  readonly role: RankRole;
  readonly workerId: string;
  readonly incarnation: string;
  readonly tpRank: number;
  readonly tpSize: number;
  /** The other worker of the demo (the prefill worker for a decode rank, and the reverse). */
  readonly peerWorkerId: string;
  readonly backend: Backend;
  /** Blocks per bank: the pool's slots. */
  readonly blocks: number;
  /** The resolved settings; `discovery` names the store every rank and the parent share (sqlite or etcd). */
  readonly settings: Settings;
  /** Where this rank serves its endpoint's metrics (on `endpoint.metricsHost`); absent: nowhere. */
  readonly metricsPort?: number;
  /** The native library to load (the parent's, which `transport.library` named); absent: the default one. */
  readonly libraryPath?: string;
  /** The KV geometry of the rank's banks (default Qwen3-0.6B's); an engine's, to read from that engine. */
  readonly geometry?: Geometry;
  /** Where the rank's banks are: host memory (default), or GPU memory when the parent found GPU reuse admitted. */
  readonly memory?: MemoryKind;
}

/** A message without the rank's own `role` and `tpRank`, which `say` adds. */
type Said = RankMessage extends infer M ? (M extends RankMessage ? Omit<M, 'role' | 'tpRank'> : never) : never;

/** What the process hosting a rank does to it on the rank's own request. */
export interface RankHost {
  /** Ends the rank without a drain (the host's SIGKILL), for `crash-on-pin`. */
  readonly crash: () => void;
  /** Stops the rank's process until someone sends it SIGCONT, for a pull with `stopAfterPost`; absent where the rank shares its process with others. */
  readonly stop?: () => void;
}

const qwen3 = referenceGeometries['qwen3-0.6b'];

/** The steps that open a rank's parts, which `DemoRank.open` takes so that a test can make one fail. */
export interface DemoRankSteps {
  readonly openDiscovery: typeof openDiscovery;
  readonly loadTransport: typeof loadTransport;
  readonly allocateVramBanks: typeof allocateVramBanks;
  readonly openEndpoint: typeof ReuseEndpoint.open;
}

const demoRankSteps: DemoRankSteps = {
  openDiscovery,
  loadTransport,
  allocateVramBanks,
  openEndpoint: (options) => ReuseEndpoint.open(options),
};

const hashesOf = (hex: readonly string[]): bigint[] => hex.map((text) => blockHashFromHex(text) as bigint);

export class DemoRank {
  readonly options: DemoRankOptions;
  readonly agent: Agent;
  readonly endpoint: ReuseEndpoint;
  readonly discovery: DiscoveryStore;
  /** Each bank's bytes, by bank number (with banks in vram: the host copies the rank computes its content in). */
  readonly views: readonly Uint8Array[];
  /** With banks in vram: copies blocks from the host copies up to the GPU (a no-op for host banks). */
  readonly upload: (slots: readonly number[]) => void;
  readonly pool: BlockPool;
  /** The decode rank's pin adapter over the pool. */
  readonly adapter: CrashOnPin;
  readonly #say: (message: Said) => void;
  readonly #host: RankHost;
  #part: RankPart | undefined;
  /** Lets go of the pins a `holdPins` pull holds. */
  #releasePins: (() => void) | undefined;

  private constructor(
    options: DemoRankOptions,
    endpoint: ReuseEndpoint,
    agent: Agent,
    discovery: DiscoveryStore,
    adapter: CrashOnPin,
    say: (message: Said) => void,
    host: RankHost,
    vram: VramBanks | undefined,
  ) {
    this.options = options;
    this.#host = host;
    this.agent = agent;
    this.discovery = discovery;
    this.#say = say;
    this.endpoint = endpoint;
    this.views = vram?.hostCopies ?? (endpoint.bankBytes as Uint8Array[]);
    this.upload = vram?.upload ?? (() => undefined);
    this.adapter = adapter;
    this.pool = adapter.pool;
    reportQuarantines(endpoint.ledger, say);
    endpoint.onTransition(({ to }) => {
      if (to === 'ready') say({ type: 'ready' });
    });
    if (endpoint.state === 'ready') say({ type: 'ready' });
  }

  /**
   * Opens discovery, then reads the cluster secret (`startPublishing`), starts the agent and opens the rank's
   * endpoint (its banks allocated, registered — the endpoint starts serving its metrics first, given a port —
   * and its rank part published); `reportReady()` comes next. `host` crashes or stops the rank's process when
   * a command asks for it. A step that fails closes what the steps before it opened, last opened first (the
   * banks, the agent, then discovery), and the promise rejects with that step's error, what failed to close
   * kept with it (`keepCleanupFailures`). `steps` replaces the steps themselves (tests).
   */
  static async open(
    options: DemoRankOptions,
    say: (message: Said) => void,
    host: RankHost,
    steps: DemoRankSteps = demoRankSteps,
  ): Promise<DemoRank> {
    const { role, workerId, incarnation, tpRank, tpSize, metricsPort, settings } = options;
    const discovery = steps.openDiscovery(settings.discovery);
    return startPublishing(discovery, settings.discovery, async (secret) => {
      const transport = steps.loadTransport(
        options.libraryPath === undefined ? {} : { libraryPath: options.libraryPath },
      );
      const agent = await transport.createAgent({
        name: `${workerId}-tp${tpRank}-${incarnation}`,
        backend: options.backend,
        ucx: { netDevices: settings.transport.ucxNetDevices, transports: settings.transport.ucxTransports },
      });
      let vram: VramBanks | undefined;
      try {
        const adapter = new CrashOnPin(new BlockPool(options.blocks), host.crash);
        const geometry = options.geometry ?? qwen3;
        vram =
          options.memory === 'vram'
            ? await steps.allocateVramBanks(agent, geometry, { tpRank, ppRank: 0, tpSize }, options.blocks)
            : undefined;
        let rank: DemoRank | undefined;
        const endpoint = await steps.openEndpoint({
          agent,
          discovery,
          secret,
          worker: { workerId, incarnation, role, geometry, tpSize, ppSize: 1, dpRank: 0 },
          rank: { tpRank, ppRank: 0 },
          ...(vram === undefined
            ? { blocks: options.blocks }
            : {
                banks: vram.banks,
                bankBytes: [],
                admissionGate: vramAdmissionGate(settings, transport.capabilities()),
              }),
          registerTimeoutMs: 30_000,
          // Each rank serves its metrics on a port of its own (none without one).
          settings: { ...settings, endpoint: { ...settings.endpoint, metricsPort: metricsPort ?? 0 } },
          ...(role === 'decode' ? { serve: { adapter } } : {}),
          withdrawInventory: () => (rank as DemoRank).#withdrawInventory(),
          ...(metricsPort === undefined
            ? {}
            : { metrics: new EndpointMetrics({ labels: { worker: workerId, rank: `tp${tpRank}` } }) }),
        });
        rank = new DemoRank(options, endpoint, agent, discovery, adapter, say, host, vram);
        return rank;
      } catch (error) {
        // What the caller hears is the step that failed, not a failure to undo it. The banks go first: an
        // agent refuses to close while its allocations remain (a bank already handed back is skipped).
        const banks = vram?.banks;
        throw await runEveryStep(`demo rank ${workerId} tp${tpRank} failed open`, [
          ...(banks === undefined ? [] : [{ doing: 'releasing its banks', run: () => releaseBanks(banks) }]),
          { doing: 'closing its agent', run: () => agent.close() },
        ]).then(
          () => error,
          (cleanupFailure: unknown) => keepCleanupFailures(error, 'closing what it opened', [cleanupFailure]),
        );
      }
    });
  }

  /** Once the worker is ready, says `published` with its epoch and the metrics URL. */
  async reportReady(): Promise<void> {
    const { epoch } = await this.endpoint.whenReady();
    const metricsUrl = this.endpoint.metricsListener?.url;
    this.#say({
      type: 'published',
      agentName: this.agent.name,
      epoch,
      ...(metricsUrl === undefined ? {} : { metricsUrl }),
    });
  }

  /** This rank's part of its worker, as published (its worker ready). */
  get part(): RankPart {
    this.#part ??= this.endpoint.readyRank.readiness.worker.ranks[this.options.tpRank] as RankPart;
    return this.#part;
  }

  async handle(command: RankCommand): Promise<void> {
    const expected =
      command.type === 'hand-off' || command.type === 'pull' || command.type === 'release-pins' ? 'prefill' : 'decode';
    if (this.options.role !== expected)
      throw new DemoMessageError(
        `command "${command.type}"`,
        `is for a ${expected} rank, not a ${this.options.role} rank`,
      );
    switch (command.type) {
      case 'allocate':
        this.#say({ type: 'allocated', slots: Array.from({ length: command.count }, () => this.pool.allocate()) });
        return;
      case 'retain':
        await this.#retain(command);
        return;
      case 'crash-on-pin':
        this.adapter.arm();
        this.#say({ type: 'armed' });
        return;
      case 'hand-off': {
        const handed = await handOff({
          endpoint: this.endpoint,
          part: this.part,
          decodeWorkerId: this.options.peerWorkerId,
          hashes: hashesOf(command.hashes),
          destinationSlots: command.destinationSlots,
          views: this.views,
          upload: this.upload,
        });
        this.#say({ type: 'handed-off', ...handed });
        return;
      }
      case 'pull': {
        const disarm = command.stopAfterPost === true ? this.#stopAfterPost() : undefined;
        try {
          const pull = await pullAndRecompute({
            endpoint: this.endpoint,
            part: this.part,
            views: this.views,
            upload: this.upload,
            memory: this.options.memory ?? 'dram',
            hint: hintOf(command.hint),
            ...(command.prediction === undefined ? {} : { prediction: command.prediction }),
            ...(command.holdPins === true ? { beforeRelease: (pins: readonly HeldPin[]) => this.#holdPins(pins) } : {}),
            ...(command.engineContent === true ? { engineContent: true } : {}),
          });
          this.#say({ type: 'pulled', pull });
        } finally {
          disarm?.();
        }
        return;
      }
      case 'release-pins': {
        const release = this.#releasePins;
        if (release === undefined)
          throw new DemoMessageError('command "release-pins"', 'no pull of this rank holds pins');
        this.#releasePins = undefined;
        release();
        return;
      }
    }
  }

  /**
   * Prefill: once the pull posts its reads (one per rank pair, all in one synchronous step), says
   * `stopping-after-post` and stops the process, every read still in flight. Returns the disarm, for a
   * pull that ends without posting.
   */
  #stopAfterPost(): () => void {
    const stop = this.#host.stop;
    if (stop === undefined)
      throw new DemoMessageError(
        'command "pull"',
        'stopAfterPost needs a rank in a process of its own, which it stops',
      );
    let operations = 0;
    const disarm = this.endpoint.ledger.on('posted', () => {
      operations += 1;
      if (operations > 1) return;
      queueMicrotask(() => {
        disarm();
        this.#say({ type: 'stopping-after-post', operations });
        stop();
      });
    });
    return disarm;
  }

  /** Prefill: says which sources' pins it holds, and holds them until `release-pins`. */
  #holdPins(pins: readonly HeldPin[]): Promise<void> {
    this.#say({ type: 'holding', sources: pins.map((pin) => `${pin.source.workerId}/tp${pin.source.rank.tpRank}`) });
    return new Promise((resolve) => (this.#releasePins = resolve));
  }

  /**
   * Decode: checks each handed-off block byte for byte (not in vram, which the host does not read: the
   * pull's checksums on the GPU check them), retains it, decodes the appended blocks, announces them all.
   */
  async #retain(command: Extract<RankCommand, { type: 'retain' }>): Promise<void> {
    const hashes = hashesOf(command.hashes);
    const onHost = this.options.memory !== 'vram';
    let verified = 0;
    for (const [index, slot] of command.slots.entries()) {
      const hash = hashes[index] as bigint;
      if (onHost && holdsBlockContent(this.part, this.views, slot, hash)) verified++;
      this.pool.commit(slot, hash);
    }
    const appended = hashesOf(command.append);
    const appendedSlots = appended.map((hash) => {
      const slot = this.pool.allocate();
      writeBlockContent(this.part, this.views, slot, hash);
      this.pool.commit(slot, hash);
      return slot;
    });
    this.upload(appendedSlots);
    // The endpoint announces them under a lease of their own, and withdraws them at its drain.
    if (command.publishInventory)
      await this.endpoint.announceInventory([...hashes, ...appended], {
        tier: this.options.memory === 'vram' ? 'gpu' : 'host',
        ttlMs: 600_000,
      });
    this.#say({ type: 'retained', blocks: hashes.length + appended.length, verified, appended: appended.length });
  }

  /**
   * The drain's step after the rank part's and the announced inventory's withdrawal. A serving rank's
   * drain goes straight on to refuse new pins and wait for the held ones, so it says
   * `waiting-for-readers` last: a pin released after that is waited for.
   */
  async #withdrawInventory(): Promise<void> {
    if (this.options.role === 'decode') this.#say({ type: 'waiting-for-readers' });
  }

  /**
   * In-process stand-in for SIGKILL (the loopback host's): no drain, no pin released, no publication
   * withdrawn; the regions go away under any reader and the agent closes. Every step runs, whatever the
   * ones before it threw; their failures come after, together (`runEveryStep`).
   */
  async crash(): Promise<void> {
    const registered = this.endpoint.registered;
    await runEveryStep(`${this.#name} crash`, [
      { doing: 'releasing its banks', run: () => (registered === undefined ? undefined : releaseRank(registered)) },
      { doing: 'closing its agent', run: () => this.agent.close() },
      { doing: 'closing its discovery store', run: () => this.discovery.close() },
      { doing: 'closing its metrics listener', run: () => this.endpoint.metricsListener?.close() },
    ]);
  }

  /**
   * SIGTERM: the endpoint's shutdown, source side first (pins waited for; its metrics listener closed last), then
   * discovery closed, whether the shutdown threw or not; their failures come after, together (`runEveryStep`).
   */
  async close(): Promise<EndpointShutdownResult> {
    let result: EndpointShutdownResult | undefined;
    await runEveryStep(`${this.#name} shutdown`, [
      { doing: 'shutting its endpoint down', run: async () => (result = await this.endpoint.close()) },
      { doing: 'closing its discovery store', run: () => this.discovery.close() },
    ]);
    return result as EndpointShutdownResult;
  }

  /** `demo rank decode-0 tp0`, for its errors. */
  get #name(): string {
    return `demo rank ${this.options.workerId} tp${this.options.tpRank}`;
  }
}
