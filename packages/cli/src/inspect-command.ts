import { kvreuseSettings, type Settings } from './settings/all-settings.js';
import { admissionGate, declaredProfile } from '@kvreuse/profile-admission';
import {
  checkKeySegment,
  defaultKeyPrefix,
  type DiscoveryStore,
  type NotReadyReason,
  RankPartPublicationError,
  type ReadinessGate,
  safeDecodeRankPartRecord,
  sealedMetadataSizes,
  watchWorkerReadiness,
  workerPartsPrefix,
} from '@kvreuse/discovery';
import { defaultInventoryPrefix, safeParseInventoryBatch } from '@kvreuse/inventory';
import type { OptionSpec } from './args.js';
import type { CliContext, Command } from './command.js';
import { listWorkerIds, openPublishedDiscovery } from './discovery.js';
import { UsageError } from './errors.js';
import { inspectGroupsHelp } from './help-groups.js';
import { summarizeInventoryBatch, type InventorySummary } from './inventory-summary.js';
import { dataOptions, documentFormatOf, renderDocument } from './output.js';
import { nativeCapabilities, type SettingsWithSources } from './native.js';
import { type ProcessPins, readProcessPins } from './pin-metrics.js';
import {
  resolveCommandSettings,
  settingsFilesFrom,
  settingsHelp,
  settingsOptions,
} from './settings/command-settings.js';

/** One published rank part, as inspect reports it. */
export interface InspectedRankPart {
  readonly tpRank: number;
  readonly ppRank: number;
  readonly incarnation: string;
  readonly epoch: number;
  readonly role: string;
  readonly banks: number;
  readonly memoryKinds: readonly string[];
  readonly bytes: string;
  readonly agentName: string;
  readonly generation: number;
  /**
   * Bytes of the transport address and keys a reader loads this rank's peer from: the agent's metadata
   * blob without its signature envelope (all the published bytes when they are not a signed envelope).
   */
  readonly peerMetadataBytes: number;
  /** Bytes of the signature envelope in front of the blob (header, HMAC, signed rank part); null when the metadata is not a signed envelope this kvreuse reads. */
  readonly signatureBytes: number | null;
  /** The machine the rank runs on, when its part names it (rank parts of version 3). */
  readonly host: string | undefined;
}

export interface InspectedWorker {
  readonly workerId: string;
  readonly ready: boolean;
  readonly incarnation: string | undefined;
  readonly epoch: number | undefined;
  readonly reasons: readonly NotReadyReason[];
  readonly rankParts: readonly InspectedRankPart[];
  /** Refused parts (malformed, or under a key they do not match): the key and why. */
  readonly refusedParts: readonly { readonly key: string; readonly reason: string }[];
  readonly inventory: InventorySummary | undefined;
}

function peerMetadataSizes(metadata: Buffer): Pick<InspectedRankPart, 'peerMetadataBytes' | 'signatureBytes'> {
  const sizes = sealedMetadataSizes(metadata);
  return sizes === undefined
    ? { peerMetadataBytes: metadata.length, signatureBytes: null }
    : { peerMetadataBytes: sizes.blobBytes, signatureBytes: sizes.envelopeBytes };
}

async function rankPartsOf(
  store: DiscoveryStore,
  workerId: string,
): Promise<Pick<InspectedWorker, 'rankParts' | 'refusedParts'>> {
  const { entries } = await store.list(workerPartsPrefix(workerId, defaultKeyPrefix));
  const rankParts: InspectedRankPart[] = [];
  const refusedParts: { key: string; reason: string }[] = [];
  for (const entry of entries) {
    const decoded = safeDecodeRankPartRecord(entry.key, entry.value, defaultKeyPrefix);
    if (!decoded.success) {
      refusedParts.push({ key: entry.key, reason: decoded.error.message });
      continue;
    }
    const { part, epoch } = decoded.data;
    rankParts.push({
      tpRank: part.parallel.tpRank,
      ppRank: part.parallel.ppRank,
      incarnation: part.incarnation,
      epoch,
      role: part.role,
      banks: part.banks.length,
      memoryKinds: [...new Set(part.banks.map((bank) => bank.memKind))],
      bytes: part.banks.reduce((sum, bank) => sum + bank.bytes, 0n).toString(),
      agentName: part.transport.agentName,
      generation: part.transport.generation,
      ...peerMetadataSizes(Buffer.from(part.transport.metadata, 'base64')),
      host: part.host,
    });
  }
  return { rankParts, refusedParts };
}

async function inventoryOf(
  store: DiscoveryStore,
  now: number,
): Promise<{ summaries: Map<string, InventorySummary>; refused: string[] }> {
  const { entries } = await store.list(defaultInventoryPrefix);
  const summaries = new Map<string, InventorySummary>();
  const refused: string[] = [];
  for (const entry of entries) {
    const parsed = safeParseInventoryBatch(entry.value);
    const workerIdRefused = parsed.success ? keySegmentRefusal(parsed.data.workerId) : undefined;
    if (!parsed.success) refused.push(`${entry.key}: ${parsed.error.message}`);
    else if (workerIdRefused !== undefined)
      refused.push(`${entry.key}: workerId ${JSON.stringify(parsed.data.workerId)} ${workerIdRefused}`);
    else summaries.set(parsed.data.workerId, summarizeInventoryBatch(parsed.data, now));
  }
  return { summaries, refused };
}

/** Why a worker id cannot name the worker's keys in discovery (where inspect looks its rank parts up), if it cannot. */
function keySegmentRefusal(workerId: string): string | undefined {
  try {
    checkKeySegment('workerId', workerId);
    return undefined;
  } catch (error) {
    if (error instanceof RankPartPublicationError) return error.reason;
    throw error;
  }
}

/** The declared profile as the admission gate readiness uses, as a worker's own process would install it. */
function gateOf({ settings, provenance }: SettingsWithSources, cwd: string): ReadinessGate | undefined {
  const profile = declaredProfile(settings, { settings: kvreuseSettings });
  return profile === undefined
    ? undefined
    : admissionGate(profile, {
        capabilities: nativeCapabilities({ settings, provenance }, cwd),
        settings,
        composition: kvreuseSettings,
      });
}

/** Everything discovery holds about workers: readiness with its reasons, rank parts, inventory. */
export async function inspectDiscovery(
  store: DiscoveryStore,
  settings: SettingsWithSources,
  cwd: string,
  now: number,
): Promise<{ workers: InspectedWorker[]; refusedInventory: string[] }> {
  const admission = gateOf(settings, cwd);
  const { summaries, refused } = await inventoryOf(store, now);
  const ids = [...new Set([...(await listWorkerIds(store, defaultKeyPrefix)), ...summaries.keys()])].sort();
  const workers: InspectedWorker[] = [];
  for (const workerId of ids) {
    const watch = await watchWorkerReadiness(store, workerId, {
      ...(admission === undefined ? {} : { admissionGate: admission }),
      onChange: () => {},
      logger: { warn: () => {} },
    });
    const readiness = watch.current;
    await watch.close();
    workers.push({
      workerId,
      ready: readiness.ready,
      incarnation: readiness.incarnation,
      epoch: readiness.ready ? readiness.epoch : undefined,
      reasons: readiness.ready ? [] : readiness.reasons,
      ...(await rankPartsOf(store, workerId)),
      inventory: summaries.get(workerId),
    });
  }
  return { workers, refusedInventory: refused };
}

function renderWorker(worker: InspectedWorker): string[] {
  const head = worker.ready
    ? `worker ${worker.workerId}: ready (incarnation ${worker.incarnation}, epoch ${worker.epoch})`
    : `worker ${worker.workerId}: not ready${worker.incarnation === undefined ? '' : ` (incarnation ${worker.incarnation})`}`;
  const lines = [head, ...worker.reasons.map((reason) => `  not ready because (${reason.kind}): ${reason.message}`)];
  for (const part of worker.rankParts) {
    lines.push(
      `  rank tp${part.tpRank}/pp${part.ppRank}: ${part.role}, incarnation ${part.incarnation}, epoch ${part.epoch}, ` +
        `${part.banks} banks (${part.memoryKinds.join(', ')}) ${BigInt(part.bytes).toLocaleString('en-US')} bytes`,
      `    peer: agent ${part.agentName} generation ${part.generation}, ${part.peerMetadataBytes}-byte address ` +
        `(${part.signatureBytes === null ? 'not signed metadata this kvreuse reads' : `signed: ${part.signatureBytes}-byte signature envelope`})${part.host === undefined ? '' : `, host ${part.host}`}`,
    );
  }
  for (const refused of worker.refusedParts) lines.push(`  refused part ${refused.key}: ${refused.reason}`);
  const inventory = worker.inventory;
  lines.push(
    inventory === undefined
      ? '  inventory: none published'
      : `  inventory: ${Object.entries(inventory.blocks)
          .map(([tier, blocks]) => `${tier} ${blocks} blocks`)
          .join(', ')} (advisory; incarnation ${inventory.incarnation}, batch ${inventory.seq})`,
  );
  return lines;
}

/**
 * Pins live in the processes that grant and hold them: no worker publishes them to discovery, so
 * inspect says where they are, and reads them from the processes `--metrics` names.
 */
export const pinsWhere =
  'pins: not published to discovery; each endpoint process counts the pins it serves and holds (kvreuse_pins_held{side="serve"|"pull"} at its /metrics; --metrics <url> reads them)';

const metricsOption: OptionSpec = {
  name: 'metrics',
  value: '<url>',
  repeatable: true,
  description: "an endpoint process's metrics URL (http://host:port/metrics): also show the pins it serves and holds",
};

export const inspect: Command = {
  name: 'inspect',
  summary:
    "What discovery holds (sqlite or etcd): every worker, its readiness with the reasons, its rank parts with each rank's peer (agent, generation, address, host), and its retained inventory per tier; and where pins are counted.",
  usage: '[--config <file>] [-o table|json|yaml] [--metrics <url>]… [setting flags]',
  options: [...settingsOptions, ...dataOptions, metricsOption],
  help: () =>
    `A declared profile (profile.name or profile.file) is installed as the admission gate, as workers install it.\n\n${settingsHelp(inspectGroupsHelp)}`,
  async run(args, context) {
    if (args.positionals.length > 0)
      throw new UsageError(this.name, `unexpected argument ${JSON.stringify(args.positionals[0])}`);
    const format = documentFormatOf(this.name, args);
    const urls = args.options.get('metrics') ?? [];
    for (const url of urls)
      if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
        throw new UsageError(
          this.name,
          `--metrics is an http:// or https:// URL (http://host:port/metrics), not ${JSON.stringify(url)}`,
        );
    const resolved = resolveCommandSettings(args, context);
    const settings = settingsFilesFrom(resolved.settings, context.cwd);
    const store = openPublishedDiscovery(this.name, settings.discovery, context.cwd);
    try {
      const result = await inspectDiscovery(
        store,
        { settings, provenance: resolved.provenance },
        context.cwd,
        Date.now(),
      );
      const processes: ProcessPins[] = [];
      for (const url of urls) processes.push(await readProcessPins(url));
      const where =
        settings.discovery.backend === 'sqlite'
          ? `sqlite ${settings.discovery.sqlitePath}`
          : `etcd ${settings.discovery.etcdEndpoints.join(',')}`;
      if (format !== undefined) {
        context.stdout(
          renderDocument(format, {
            discovery: where,
            ...result,
            pins: { inDiscovery: false, note: pinsWhere, processes },
          }),
        );
        return;
      }
      const ready = result.workers.filter((worker) => worker.ready).length;
      const lines = [
        `discovery ${where}: ${result.workers.length} workers, ${ready} ready`,
        ...result.workers.flatMap(renderWorker),
      ];
      for (const refused of result.refusedInventory) lines.push(`refused inventory ${refused}`);
      lines.push(
        pinsWhere,
        ...processes.map(
          (pins) => `  ${pins.url}: serving ${pins.serving} pins to readers, holding ${pins.holding} at sources`,
        ),
      );
      context.stdout(`${lines.join('\n')}\n`);
    } finally {
      await store.close();
    }
  },
};
