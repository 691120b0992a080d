// Benchmarks of the native transport through the TypeScript facade, each beside its anchor measured
// in the same run: ucx_perftest -t ucp_get for cross-process READ bandwidth by message size, a
// single-thread memcpy (Buffer.copy) for the same sizes, the 42-block pull (from kvreuse-owned memory and
// from caller memory) and the per-descriptor overhead.
// Writes bench/parts/native-bindings.json at the repository root.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type Agent,
  type Allocation,
  type BlockingCall,
  describeBlockingCall,
  monitorBlockingCalls,
  type Peer,
  type PostRequest,
  type Region,
  type TransferDescriptors,
} from '@kvreuse/native-bindings';
import { agentName, transport } from '../test/support/backends.js';
import { spawnScript } from '../test/support/child.js';
import { findPatternMismatch } from '../test/support/content.js';
import { namespacesUnavailable, openVethPair, tcpOverVeth } from '../test/support/netns.js';
import { openPair } from '../test/support/pair.js';
import {
  QWEN3_PIECE_BYTES,
  QWEN3_PREFIX_BLOCKS,
  QWEN3_PREFIX_BYTES,
  QWEN3_PREFIX_PIECES,
} from '../test/support/qwen3.js';
import { prefixTemplate, timePreparedPull } from './prepared.js';
import { descriptors, seconds, timeReads } from './reads.js';
import { ucxPerftest } from './perftest.js';
import { mapSourcePages } from './source-pages.js';

const REPEATS = 5;
const GB = 1e9;

interface Figure {
  value: number;
  unit: string;
  anchor?: number;
  ratio?: number;
  goal?: string;
  note?: string;
}
const figures: Record<string, Figure> = {};

/** Values measured at each of `sizes` (bytes), one line per thing measured; scripts/bench-chart.mjs draws them. */
interface Series {
  title: string;
  sizes: number[];
  unit: string;
  lines: { label: string; values: (number | null)[] }[];
  /** The machine's one-minute load average when the series' measurement started and ended. */
  loadAverage: { start: number; end: number };
}
const series: Record<string, Series> = {};

/**
 * The machine is shared with other work, so every figure is the best of REPEATS runs — for the facade
 * and for its anchor alike, interleaved where they can be.
 */
const best = (values: number[]): number => Math.min(...values);
const bestRate = (values: number[]): number => Math.max(...values);

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? Number.NaN)
    : ((sorted[middle - 1] ?? Number.NaN) + (sorted[middle] ?? Number.NaN)) / 2;
}

interface PairedRatio {
  readonly ratio: number;
  /** The lowest and highest of the pairs' ratios. */
  readonly spread: readonly [number, number];
  readonly pairs: number;
}

/**
 * A ratio figure from rates measured in alternation, run i of each side one after the other: the median
 * of the runs' own ratios (`measured[i] / anchors[i]`). The host's memory bandwidth drifts by a third
 * over seconds; two runs side by side share their moment, so the drift cancels within each pair, and the
 * median passes over the pairs a preemption cut short on either side. (The ratio of each side's best run
 * compared two different moments, and moved by up to 15% between full runs of the same code.)
 */
function pairedRatio(measured: readonly number[], anchors: readonly number[]): PairedRatio {
  const ratios = measured.map((value, i) => value / (anchors[i] ?? Number.NaN));
  return { ratio: median(ratios), spread: [Math.min(...ratios), Math.max(...ratios)], pairs: ratios.length };
}

function describePairs({ ratio, spread, pairs }: PairedRatio): string {
  return `median of ${pairs} interleaved pairs' ratios ${ratio.toFixed(3)} (pairs ${spread[0].toFixed(2)}–${spread[1].toFixed(2)})`;
}

/** Single-thread memcpy of `bytes`, `copies` times over, between two pre-faulted native banks, via Buffer.copy (memmove). */
function memcpySeconds(from: Buffer, to: Buffer, bytes: number, copies = 1): number {
  from.copy(to, 0, 0, bytes);
  const times: number[] = [];
  for (let r = 0; r < REPEATS; r++) {
    const start = process.hrtime.bigint();
    for (let c = 0; c < copies; c++) from.copy(to, 0, 0, bytes);
    times.push(seconds(start));
  }
  return best(times);
}

/** A local agent with a bank and, in a child process, a ucx source agent with a bank of `bytes`. */
interface RemoteSetup {
  readonly agent: Agent;
  readonly bank: Allocation;
  readonly region: Region;
  readonly peer: Peer;
  readonly remoteRegion: number;
  /** The source's metadata blob, base64 (as it published it). */
  readonly metadata?: string;
  /** The source process's pid. */
  readonly sourcePid?: number;
  close(): Promise<void>;
}

/** What the source's bank is: from the library's allocator, caller memory it registers by address, or
 * caller memory that is a shared mapping of a memfd, registered with its fd. */
type SourceMemory = 'allocated' | 'caller' | 'file';

async function remoteSource(bytes: number, seed: number, memory: SourceMemory = 'allocated'): Promise<RemoteSetup> {
  const child = spawnScript('test/support/source-process.ts', {
    args: [agentName('bench-source'), String(bytes), String(seed), memory],
  });
  const published = await child.next<{ metadata: string; region: number }>('ready');
  const metadata = published.metadata;
  const agent = await transport.createAgent({ name: agentName('bench-reader'), backend: 'ucx' });
  const bank = await agent.allocate(bytes);
  bank.view().fill(0);
  const region = agent.register(bank);
  const peer = await agent.loadPeerInBackground(Buffer.from(published.metadata, 'base64'));
  return {
    agent,
    bank,
    region,
    peer,
    remoteRegion: published.region,
    metadata,
    ...(child.process.pid === undefined ? {} : { sourcePid: child.process.pid }),
    async close() {
      await region.deregister();
      await bank.free();
      await agent.close();
      child.send({ command: 'close' });
      await child.next('closed');
      await child.exited;
    },
  };
}

/** Seconds from posting `batches` batches (at most `window` in flight) to the last completion; given several, each for an equal run of them. */
function timeRemoteReads(
  setup: RemoteSetup,
  batch: TransferDescriptors | readonly TransferDescriptors[],
  batches: number,
  window: number,
): Promise<number> {
  const request = (descriptors: TransferDescriptors): PostRequest => ({
    direction: 'read',
    peer: setup.peer,
    descriptors,
    localRegions: [setup.region],
    remoteRegions: [setup.remoteRegion],
  });
  return timeReads(setup.agent, ([] as TransferDescriptors[]).concat(batch).map(request), batches, window);
}

/** The lanes and get protocol of the facade's endpoint, from the library's own report (ucp_ep_print_info). */
function describePath(text: string): string {
  const lanes = [...text.matchAll(/lane\[\d+\]:\s+\d+:([\w-]+\/[\w-]+)/g)].map((match) => match[1]);
  const gets = [...text.matchAll(/get\[\d+\]:\s+(\S+)/g)].map((match) => match[1]);
  const direct = /its file mapped/.test(text)
    ? "; the source region's file is mapped here and READs are copied directly"
    : /copied directly/.test(text)
      ? '; the source region is mapped through shared memory and copied directly'
      : '';
  return `lanes ${lanes.join(', ') || 'not reported'}; get ${[...new Set(gets)].join(', ') || 'not reported'}${direct}`;
}

/**
 * A message size of the sweep: `gets` READs of it per run, posted in batches of `batchSize` descriptors,
 * `window` batches in flight. Batches amortise the per-operation cost (the completion's wake-up of Node's
 * thread and its post of the next batch, which runs on the other of the 2 cores while the copy runs and
 * slows it): from 256 KiB up each batch is 64 MiB. Four in flight: the progress thread copies the
 * operations in flight a 16 MiB slice each in turn, so equal ones end about one slice apart; with two in
 * flight the one left then had a single slice (0.7 ms at 4 MiB) for Node to wake and post the next, less
 * than that wake-up can take on this machine (0.6–1.5 ms measured from a pull's last copy to its
 * continuation), and the thread sat idle. Measured at 4 MiB against ucx_perftest (median of 16 pairs
 * each, alternated in one run): 4 descriptors per batch, two in flight 0.83; 16, two in flight 0.93;
 * 16, four in flight 0.99. At 128 KiB × 256 two and four in flight were alike (1.005 and 1.001, 30
 * pairs each). Four of the sizes are figures of their own (4 KiB, 16 KiB, 128 KiB, 4 MiB). The 128 KiB
 * figure's runs are 100,000 gets (13 GB, about 0.3 s each side): with 20,000 (70 ms) the median of 31
 * pairs ranged over 0.86–1.04 from one setup to the next (11 setups in a row); with 100,000, six setups in a row gave 0.96–1.08,
 * and each pair's runs are longer than the host's short dips. That alone still gave 1.01, 0.64 and
 * 0.91 in three full runs: what was left was the buffers' placement (readRates). Reading four windows
 * a run, five setups in a row gave 0.98–1.02, and three full runs 0.99, 1.05 and 0.93: single pairs
 * still spread over 0.65–2.1, so the median of 61 moves by about ±0.035 from run to run, hence 121 pairs
 * at 128 KiB. Its batches are 512 descriptors (64 MiB, as from 256 KiB up): against 256, in two setups,
 * 1.013 and 1.014 of the rate, since Node's thread, which wakes once a batch, then works half as often
 * on the other core. The 4 KiB and 16 KiB runs are 2,000,000 and 1,000,000 gets (8 and 16 GB, about 0.13 and
 * 0.2 s each side). With 100,000 and 50,000 (7 and 13 ms), what a run measured was mostly its start: each
 * facade run follows a ucx_perftest run and starts from idle, and on this kind of machine the first reads
 * after an idle spell take 2 to 4 times as long as the following ones (one 4 KiB read, post to settled
 * promise: 272–277 µs after 200 ms of idle, 112–138 µs after 1 ms), while ucx_perftest, one thread that
 * polls, never idles once it runs. Same code, one setup each, medians of 31 pairs: 4 KiB 0.754 at 100,000
 * gets, 0.871 and 1.029 at 1,000,000, 0.999 at 2,000,000; 16 KiB 0.836 at 50,000, 0.962 at 400,000, 0.989 at
 * 500,000, 0.983 at 1,000,000.
 */
interface SweepPoint {
  readonly size: number;
  readonly gets: number;
  readonly batchSize: number;
  readonly window: number;
  readonly figure?: string;
  /** The figure's goal; ≥ 0.95 where none is given. */
  readonly goal?: string;
  /** Pairs of runs (facade, then ucx_perftest); REPEATS where none is given. */
  readonly pairs?: number;
  /** Windows of the banks each facade run reads in turn (see readRates); 1 where none is given. */
  readonly windowsPerRun?: number;
}

const SWEEP: readonly SweepPoint[] = [
  {
    size: 4 << 10,
    gets: 2_000_000,
    batchSize: 256,
    window: 4,
    figure: 'read.4k.vs_ucx_perftest',
    goal: '≥ 0.8',
    pairs: 31,
    windowsPerRun: 8,
  },
  {
    size: 16 << 10,
    gets: 1_000_000,
    batchSize: 256,
    window: 4,
    figure: 'read.16k.vs_ucx_perftest',
    goal: '≥ 0.9',
    pairs: 31,
    windowsPerRun: 8,
  },
  { size: 64 << 10, gets: 20_000, batchSize: 256, window: 4, windowsPerRun: 8 },
  {
    size: 128 << 10,
    gets: 100_000,
    batchSize: 512,
    window: 4,
    figure: 'read.128k.vs_ucx_perftest',
    pairs: 121,
    windowsPerRun: 8,
  },
  { size: 256 << 10, gets: 10_000, batchSize: 256, window: 4, windowsPerRun: 8 },
  { size: 1 << 20, gets: 4_000, batchSize: 64, window: 4 },
  { size: 4 << 20, gets: 2_000, batchSize: 16, window: 4, figure: 'read.4m.vs_ucx_perftest', pairs: 61 },
];
/**
 * Bytes each memcpy run of the sweep copies, one size over and over: about a millisecond, so that some
 * of the runs fit between two preemptions on a loaded machine, and far above the clock's own cost.
 */
const SWEEP_MEMCPY_BYTES = 32 << 20;

/** Best rates, in bytes per second, of a point's READs through the facade and of ucx_perftest's gets, and their paired ratio. */
interface ReadRates {
  readonly gets: number;
  readonly facade: number;
  readonly perftest: number;
  readonly paired: PairedRatio;
  readonly perftestLanes: string;
}

/**
 * The sweep's banks, each side: 128 windows of 128 KiB for the runs of that figure to move between (see
 * readRates).
 */
const SWEEP_BANK_BYTES = 16 << 20;

/**
 * The facade, like ucx_perftest, reads one reused buffer each side. Up to 256 KiB, where both buffers
 * of a get fit in a core's L2 (512 KiB), it moves its buffers between runs as ucx_perftest does: there
 * a buffer's speed depends on the physical pages it got, and keeps it as long as the buffer lives. Each
 * ucx_perftest run is a new process with new buffers, so each of its runs drew a placement of its own,
 * while the facade's drew one for the whole point, and a setup whose buffers were slow lost every pair
 * (0.64 in one full run). Measured in one setup, 16 windows of 128 KiB read in turn 10 times over:
 * medians 24–36 GB/s, and a window kept its speed from pass to pass (one at 26–29 GB/s in all ten,
 * another at 33–41). How their pages spread over the L2's 16 page colours explains some of the slow
 * windows, not all. So each facade run reads `windowsPerRun` windows of the banks in turn, each for an
 * equal share of its gets with no pause between, and the next run the next ones: its placement luck is
 * averaged within the run, where ucx_perftest's is drawn once per run. The run's rate is its bytes over
 * its whole time, which weighs a slow window more (against the facade, by about 1%). Against the same
 * facade reading one window, in three setups, eight windows a run read at 0.995, 1.037 and 1.010 of
 * it at 128 KiB, but 0.91, 0.89 and 0.93 at 4 MiB (not understood), so the sizes whose two buffers do
 * not fit in L2 (1 MiB, 4 MiB) read the banks' first window in every run.
 */
async function readRates(
  setup: RemoteSetup,
  { size, gets, batchSize, window, pairs = REPEATS, windowsPerRun = 1 }: SweepPoint,
): Promise<ReadRates> {
  const windows = Math.max(1, Math.floor(setup.bank.bytes / size)); // the source's bank is as large
  const batchOf = (w: number): TransferDescriptors => {
    const offset = (w % windows) * size;
    return descriptors(batchSize, size, () => offset);
  };
  const runBatches = (r: number): TransferDescriptors[] =>
    Array.from({ length: windowsPerRun }, (_, k) => batchOf(r * windowsPerRun + k));
  const batches = Math.ceil(gets / batchSize);
  await timeRemoteReads(setup, batchOf(0), Math.ceil(100 / batchSize), window); // warm-up, as ucx_perftest -w 100
  const facade: number[] = [];
  const perftest: number[] = [];
  let perftestLanes = '';
  for (let r = 0; r < pairs; r++) {
    const batch = runBatches(r);
    const anchorRun = await ucxPerftest(size, batches * batchSize, {
      beside: () => timeRemoteReads(setup, batch, batches, window),
    });
    facade.push((batches * batchSize * size) / (anchorRun.beside ?? Number.NaN));
    perftest.push(anchorRun.bytesPerSecond);
    perftestLanes = anchorRun.lanes;
  }
  return {
    gets: batches * batchSize,
    facade: bestRate(facade),
    perftest: bestRate(perftest),
    paired: pairedRatio(facade, perftest),
    perftestLanes,
  };
}

function readFigure({ size, batchSize, window, goal }: SweepPoint, rates: ReadRates, facadePath: string): Figure {
  const value = rates.facade / GB;
  const anchor = rates.perftest / GB;
  return {
    value: rates.paired.ratio,
    unit: 'ratio',
    anchor,
    ratio: rates.paired.ratio,
    goal: goal ?? '≥ 0.95',
    note:
      `anchor: ucx_perftest's best GB/s. Facade vs ucx_perftest -t ucp_get: ${describePairs(rates.paired)}; best runs ${value.toFixed(2)} vs ${anchor.toFixed(2)} GB/s ` +
      `(${size} B, one reused buffer each side, ${rates.gets} gets; facade: batches of ${batchSize} descriptor(s), ${window} in flight; ` +
      `facade's endpoint: ${facadePath}; ucx_perftest's lanes: ${rates.perftestLanes})`,
  };
}

/**
 * READ bandwidth by message size from one source process: the facade and ucx_perftest interleaved at
 * each size, then a memcpy of that size between two banks of the reader, all on one reused buffer each
 * side. Written as the series `bandwidth`, which the merge draws into docs/bench-bandwidth.svg.
 */
async function readsBySize(points: readonly SweepPoint[] = SWEEP): Promise<void> {
  const started = process.hrtime.bigint();
  const loadAtStart = loadavg()[0] ?? Number.NaN;
  const largest = Math.max(...points.map((point) => point.size));
  const setup = await remoteSource(SWEEP_BANK_BYTES, 7);
  const copyTarget = await setup.agent.allocate(largest);
  const facadePath = describePath(setup.peer.transport());
  const facade: number[] = [];
  const perftest: number[] = [];
  const memcpy: number[] = [];
  for (const point of points) {
    const pointStarted = process.hrtime.bigint();
    const rates = await readRates(setup, point);
    const copies = Math.max(1, Math.round(SWEEP_MEMCPY_BYTES / point.size));
    const copyRate = (copies * point.size) / memcpySeconds(setup.bank.view(), copyTarget.view(), point.size, copies);
    facade.push(rates.facade / GB);
    perftest.push(rates.perftest / GB);
    memcpy.push(copyRate / GB);
    console.log(
      `read ${point.size} B: facade ${(rates.facade / GB).toFixed(2)} GB/s, ucx_perftest ${(rates.perftest / GB).toFixed(2)} GB/s, ` +
        `memcpy ${(copyRate / GB).toFixed(2)} GB/s (${seconds(pointStarted).toFixed(1)} s)`,
    );
    if (point.figure !== undefined) {
      figures[point.figure] = readFigure(point, rates, facadePath);
      console.log(`${point.figure}: ${figures[point.figure]?.note}`);
    }
  }
  await copyTarget.free();
  await setup.close();
  series.bandwidth = {
    title: 'READ bandwidth by message size, two processes on one host',
    sizes: points.map((point) => point.size),
    unit: 'GB/s',
    lines: [
      { label: 'kvreuse read (facade)', values: facade },
      { label: 'ucx_perftest -t ucp_get', values: perftest },
      { label: 'memcpy (Buffer.copy, one thread)', values: memcpy },
    ],
    loadAverage: { start: loadAtStart, end: loadavg()[0] ?? Number.NaN },
  };
  console.log(`read sweep: ${points.length} sizes in ${seconds(started).toFixed(1)} s`);
}

/** The 42-block prefix as one batch of 2,352 × 128 KiB, the same offsets both sides. */
const prefixBatch = (): TransferDescriptors =>
  descriptors(QWEN3_PREFIX_PIECES, QWEN3_PIECE_BYTES, (i) => i * QWEN3_PIECE_BYTES);

/** Pulls the prefix once from `setup`'s source (pattern seed 42) and checks every byte. */
async function verifiedPrefixPull(setup: RemoteSetup, batch: TransferDescriptors, what: string): Promise<void> {
  await timeRemoteReads(setup, batch, 1, 1);
  const mismatch = findPatternMismatch(setup.bank.view(), 42);
  if (mismatch !== -1) throw new Error(`${what}: byte ${mismatch} of the prefix differs from the source`);
}

/**
 * A pull of the prefix takes ~35 ms and the host's memory bandwidth moves by a third from one second to
 * the next, so the pulls and their memcpy anchor alternate, PREFIX_REPEATS times, and each ratio is
 * the median of the pairs' (pairedRatio): single pairs spread over 0.6–1.6, and the median of 25 moved
 * by ±0.05 between runs.
 */
const PREFIX_REPEATS = 61;

const prefixRates = (times: readonly number[]): number[] => times.map((time) => QWEN3_PREFIX_BYTES / time);

/** One memcpy of the prefix at a time, in seconds, and what to release after the last. */
interface PrefixMemcpy {
  time(): number;
  release(): Promise<void>;
}

/**
 * The anchor of a pull: a memcpy of the prefix from the source's bank into the reader's, the very pages
 * the pull reads (mapped into this process) and writes (source-pages.ts says why the same pages).
 */
function sourcePagesMemcpy(setup: RemoteSetup): PrefixMemcpy {
  const remote = setup.peer.regions().find((region) => region.id === setup.remoteRegion);
  if (remote === undefined) throw new Error(`the source advertises no region ${setup.remoteRegion}`);
  if (setup.sourcePid === undefined) throw new Error('the source process has no pid: it did not start');
  const source = mapSourcePages(setup.sourcePid, remote.address, QWEN3_PREFIX_BYTES);
  return copier(source.view, setup.bank.view(), async () => source.unmap());
}

/** For a source whose bank is anonymous memory (no file to map it through): a memcpy from the reader's bank into a scratch bank. */
async function bankMemcpy(setup: RemoteSetup): Promise<PrefixMemcpy> {
  const copyTarget = await setup.agent.allocate(QWEN3_PREFIX_BYTES);
  return copier(setup.bank.view(), copyTarget.view(), () => copyTarget.free());
}

function copier(from: Buffer, to: Buffer, release: () => Promise<void>): PrefixMemcpy {
  from.copy(to, 0, 0, QWEN3_PREFIX_BYTES);
  return {
    time() {
      const start = process.hrtime.bigint();
      from.copy(to, 0, 0, QWEN3_PREFIX_BYTES);
      return seconds(start);
    },
    release,
  };
}

async function pullQwen3Prefix(): Promise<void> {
  const setup = await remoteSource(QWEN3_PREFIX_BYTES, 42);
  const batch = prefixBatch();
  await verifiedPrefixPull(setup, batch, 'pull');
  const template = setup.agent.registerTemplate({
    peer: setup.peer,
    template: prefixTemplate(setup.agent, setup.bank.address, setup.peer, setup.metadata ?? ''),
    direction: 'read',
    localRegions: [setup.region],
    remoteRegions: [setup.remoteRegion],
  });
  setup.bank.view().fill(0);
  await timePreparedPull(setup.agent, template);
  const preparedMismatch = findPatternMismatch(setup.bank.view(), 42);
  if (preparedMismatch !== -1)
    throw new Error(`prepared pull: byte ${preparedMismatch} of the prefix differs from the source`);
  // The explicit pull and the prepared pull, each followed by the memcpy it is paired with.
  const times: number[] = [];
  const preparedTimes: number[] = [];
  const memcpyTimes: number[] = [];
  const preparedMemcpyTimes: number[] = [];
  const copy = sourcePagesMemcpy(setup);
  for (let r = 0; r < PREFIX_REPEATS; r++) {
    times.push(await timeRemoteReads(setup, batch, 1, 1));
    memcpyTimes.push(copy.time());
    preparedTimes.push(await timePreparedPull(setup.agent, template));
    preparedMemcpyTimes.push(copy.time());
  }
  await copy.release();
  template.release();
  const pulls = prefixRates(times);
  const preparedPulls = prefixRates(preparedTimes);
  const memcpys = prefixRates(memcpyTimes);
  const preparedMemcpys = prefixRates(preparedMemcpyTimes);
  const pull = bestRate(pulls);
  const prepared = bestRate(preparedPulls);
  const memcpy = bestRate([...memcpys, ...preparedMemcpys]);
  const pullPairs = pairedRatio(pulls, memcpys);
  const preparedPairs = pairedRatio(preparedPulls, preparedMemcpys);
  await setup.close();
  figures['pull.qwen3_42blocks.gbytes_per_s'] = {
    value: pull / GB,
    unit: 'GB/s',
    note: `${QWEN3_PREFIX_PIECES} × ${QWEN3_PIECE_BYTES} B READ as one batch from another process over ucx; best of ${PREFIX_REPEATS}`,
  };
  figures['pull.qwen3_42blocks.vs_memcpy'] = {
    value: pullPairs.ratio,
    unit: 'ratio',
    anchor: memcpy / GB,
    ratio: pullPairs.ratio,
    goal: '≥ 0.9',
    note:
      `anchor: the best single-thread memcpy (Buffer.copy) of the same ${QWEN3_PREFIX_BYTES} bytes from the source's bank (mapped into the reader) into the reader's, GB/s. ` +
      `${describePairs(pullPairs)}, each pull next to a memcpy; best runs ${(pull / GB).toFixed(2)} vs ${(memcpy / GB).toFixed(2)} GB/s`,
  };
  figures['pull.prepared.qwen3_42blocks.vs_memcpy'] = {
    value: preparedPairs.ratio,
    unit: 'ratio',
    anchor: memcpy / GB,
    ratio: preparedPairs.ratio,
    goal: '≥ 0.9',
    note:
      `anchor: the same memcpy, GB/s. The same ${QWEN3_PREFIX_BYTES} bytes READ from the same process as one post of two ${QWEN3_PREFIX_BLOCKS}-block ` +
      `lists on a transfer template (Qwen3-0.6B, one fully contiguous TP 1 bank each side: ${QWEN3_PREFIX_PIECES} pieces expanded by the progress thread), ` +
      `each pull followed by a memcpy: ${describePairs(preparedPairs)}; best run ${(prepared / GB).toFixed(2)} GB/s`,
  };
  console.log(
    `pull: ${(pull / GB).toFixed(2)} GB/s, prepared ${(prepared / GB).toFixed(2)} GB/s, memcpy ${(memcpy / GB).toFixed(2)} GB/s`,
  );
}

/**
 * The prefix READ from caller memory: the source registers memory of its own (not from the library's
 * allocator, as a framework's bank would be), and the reader in this process pulls it over ucx as one
 * batch, beside a memcpy of the same bytes measured in the same run. `file`: a memfd mapping registered
 * with its fd, which the reader maps and copies itself; `caller`: an anonymous Node Buffer registered by
 * address, which UCX 1.13 serves through its software path. The note says which path the bytes took: the
 * library's description of the peer, the bytes read through the mapped file and the UCX requests issued.
 */
async function pullFromCallerMemory(memory: 'file' | 'caller', figure: string): Promise<void> {
  const setup = await remoteSource(QWEN3_PREFIX_BYTES, 42, memory);
  const path = describePath(setup.peer.transport());
  const batch = prefixBatch();
  await verifiedPrefixPull(setup, batch, `${memory} memory pull`);
  const before = setup.agent.counters();
  const times: number[] = [];
  const memcpyTimes: number[] = [];
  const copy = memory === 'file' ? sourcePagesMemcpy(setup) : await bankMemcpy(setup);
  for (let r = 0; r < PREFIX_REPEATS; r++) {
    times.push(await timeRemoteReads(setup, batch, 1, 1));
    memcpyTimes.push(copy.time());
  }
  await copy.release();
  const after = setup.agent.counters();
  const requestsPerPull = (after.requestsIssued - before.requestsIssued) / PREFIX_REPEATS;
  const fileBytesPerPull = (after.fileReadBytes - before.fileReadBytes) / PREFIX_REPEATS;
  await setup.close();
  const pulls = prefixRates(times);
  const memcpys = prefixRates(memcpyTimes);
  const pull = bestRate(pulls);
  const memcpy = bestRate(memcpys);
  const pairs = pairedRatio(pulls, memcpys);
  const registered =
    memory === 'file'
      ? 'a memfd mapping of its own (FileMemory, register({ address, bytes, file: { fd, offset } }))'
      : 'a Node Buffer of its own (anonymous caller memory, register({ address, bytes }))';
  figures[figure] = {
    value: pairs.ratio,
    unit: 'ratio',
    anchor: memcpy / GB,
    ratio: pairs.ratio,
    ...(memory === 'file' ? { goal: '≥ 0.8' } : {}),
    note:
      `anchor: the best single-thread memcpy (Buffer.copy) of the same ${QWEN3_PREFIX_BYTES} bytes, ` +
      `${memory === 'file' ? "from the source's memory (mapped into the reader) into the reader's bank" : "from the reader's bank into a scratch bank (anonymous memory has no file to map it through)"}, GB/s. ` +
      `The source process registered ${registered}; this process READ it as one batch of ${QWEN3_PREFIX_PIECES} × ${QWEN3_PIECE_BYTES} B, ` +
      `each pull next to a memcpy: ${describePairs(pairs)}; best run ${(pull / GB).toFixed(3)} GB/s. Path: ${path}; per pull ${fileBytesPerPull} bytes copied out of the mapped file ` +
      `and ${requestsPerPull} UCX get requests (native/README.md, "Caller memory at memory speed")`,
  };
  console.log(`${figure}: ${figures[figure].note}`);
}

/**
 * The library keeps 8 MiB of requests in flight per operation (native/README.md, "Posting"): 64 gets
 * of 128 KiB, the depth ucx_perftest is given for the same gets.
 */
const FACADE_GETS_IN_FLIGHT = (8 << 20) / QWEN3_PIECE_BYTES;
/** A pull over tcp here takes a few hundred ms and moves with the machine's load, so more runs than REPEATS. */
const TCP_REPEATS = 15;

/**
 * The 42-block prefix pulled across a network: source and reader in two network namespaces joined by
 * a veth pair, both held to tcp over it, beside ucx_perftest's gets of the same size and number between
 * the same namespaces with the same settings, interleaved.
 */
async function pullOverTcpBetweenNamespaces(): Promise<void> {
  const pair = openVethPair();
  try {
    const env = tcpOverVeth(pair);
    const source = spawnScript('test/support/source-process.ts', {
      args: [agentName('tcp-source'), String(QWEN3_PREFIX_BYTES), '42'],
      launcher: pair.a.launcher,
      env,
    });
    const reader = spawnScript('bench/reader.ts', {
      args: [agentName('tcp-reader'), String(QWEN3_PREFIX_PIECES), String(QWEN3_PIECE_BYTES), '42'],
      launcher: pair.b.launcher,
      env,
    });
    reader.send(await source.next('ready'));
    const ready = await reader.next<{ path: string; mismatch: number }>('ready');
    if (ready.mismatch !== -1)
      throw new Error(`tcp pull: byte ${ready.mismatch} of the prefix differs from the source`);
    const placement = {
      serverLauncher: pair.a.launcher,
      clientLauncher: pair.b.launcher,
      serverAddress: pair.a.address,
      env,
    };
    const pulls: number[] = [];
    const perftest: number[] = [];
    let perftestLanes = '';
    for (let r = 0; r < TCP_REPEATS; r++) {
      const pull = async () => {
        reader.send({ command: 'pull' });
        return (await reader.next<{ seconds: number }>('pulled')).seconds;
      };
      const anchorRun = await ucxPerftest(QWEN3_PIECE_BYTES, QWEN3_PREFIX_PIECES, {
        placement,
        outstanding: FACADE_GETS_IN_FLIGHT,
        beside: pull,
      });
      pulls.push(QWEN3_PREFIX_BYTES / (anchorRun.beside ?? Number.NaN));
      perftest.push(anchorRun.bytesPerSecond);
      perftestLanes = anchorRun.lanes;
    }
    for (const child of [reader, source]) {
      child.send({ command: 'close' });
      await child.next('closed');
      await child.exited;
    }
    const value = bestRate(pulls) / GB;
    const anchor = bestRate(perftest) / GB;
    const pairs = pairedRatio(pulls, perftest);
    figures['pull.tcp_netns.vs_ucx_perftest'] = {
      value: pairs.ratio,
      unit: 'ratio',
      anchor,
      ratio: pairs.ratio,
      goal: '≥ 0.9',
      note:
        `anchor: ucx_perftest's best GB/s. Two network namespaces joined by a veth pair, UCX_TLS=tcp, UCX_NET_DEVICES=${pair.device}: ` +
        `the ${QWEN3_PREFIX_BYTES}-byte prefix READ as one batch of ${QWEN3_PREFIX_PIECES} × ${QWEN3_PIECE_BYTES} B ` +
        `vs ucx_perftest -t ucp_get -s ${QWEN3_PIECE_BYTES} -n ${QWEN3_PREFIX_PIECES} -O ${FACADE_GETS_IN_FLIGHT}: ${describePairs(pairs)}; ` +
        `best runs ${value.toFixed(3)} vs ${anchor.toFixed(3)} GB/s (facade's endpoint: ${describePath(ready.path)}; ucx_perftest's lanes: ${perftestLanes})`,
    };
    console.log(`pull.tcp_netns.vs_ucx_perftest: ${figures['pull.tcp_netns.vs_ucx_perftest'].note}`);
  } finally {
    pair.close();
  }
}

const OVERHEAD_COUNT = 100_000;
const OVERHEAD_PIECE = 4096;
const OVERHEAD_BYTES = OVERHEAD_COUNT * OVERHEAD_PIECE;

interface Overhead {
  /** Never below 0: a batch that came out faster than the single copy is overhead below what this can resolve. */
  readonly perDescriptorNs: number;
  /** (best batch − best single) per descriptor, as measured; negative when the noise exceeds the overhead. */
  readonly measuredNs: number;
  /** What this measure can resolve: the single copy's own spread (its second-best run − its best) per descriptor. */
  readonly resolutionNs: number;
  /** One batch of 100,000 × 4 KiB, post to completion. */
  readonly batchS: number;
  /** The same 409.6 MB as one descriptor, through the same agents: the copy time itself. */
  readonly singleS: number;
  /** Single-thread memcpy of the same bytes. */
  readonly memcpyS: number;
}

/**
 * Per-descriptor cost of one batch of 100,000 × 4 KiB above the copy time itself, where the copy time
 * is the same bytes moved as one descriptor between the same banks (same backend, same memory).
 */
async function postOverhead(setup: RemoteSetup): Promise<Overhead> {
  // Destination pieces in reverse order: no two descriptors continue each other, so the library cannot
  // merge them and every one is posted on its own.
  const batch = descriptors(
    OVERHEAD_COUNT,
    OVERHEAD_PIECE,
    (i) => i * OVERHEAD_PIECE,
    (i) => (OVERHEAD_COUNT - 1 - i) * OVERHEAD_PIECE,
  );
  const single = descriptors(1, OVERHEAD_BYTES, () => 0);
  await timeRemoteReads(setup, batch, 1, 1);
  await timeRemoteReads(setup, single, 1, 1);
  const batchTimes: number[] = [];
  const singleTimes: number[] = [];
  for (let r = 0; r < REPEATS; r++) {
    batchTimes.push(await timeRemoteReads(setup, batch, 1, 1));
    singleTimes.push(await timeRemoteReads(setup, single, 1, 1));
  }
  const scratch = await setup.agent.allocate(OVERHEAD_BYTES);
  const memcpyS = memcpySeconds(setup.bank.view(), scratch.view(), OVERHEAD_BYTES);
  await scratch.free();
  await setup.close();
  const batchS = best(batchTimes);
  const [singleS = Number.NaN, secondSingleS = Number.NaN] = [...singleTimes].sort((a, b) => a - b);
  const measuredNs = ((batchS - singleS) / OVERHEAD_COUNT) * 1e9;
  const resolutionNs = ((secondSingleS - singleS) / OVERHEAD_COUNT) * 1e9;
  return { perDescriptorNs: Math.max(0, measuredNs), measuredNs, resolutionNs, batchS, singleS, memcpyS };
}

function describeOverhead(where: string, o: Overhead): string {
  return (
    `${where}: 100,000 × 4 KiB (unmergeable) in one batch ${(o.batchS * 1e3).toFixed(1)} ms, the same 409.6 MB as one descriptor ` +
    `${(o.singleS * 1e3).toFixed(1)} ms, memcpy ${(o.memcpyS * 1e3).toFixed(1)} ms → ${o.measuredNs.toFixed(1)} ns per descriptor measured` +
    `${o.measuredNs < 0 ? ' (below what this resolves: reported as 0)' : ''}, the single copy's run-to-run spread ${o.resolutionNs.toFixed(1)} ns per descriptor`
  );
}

// Every synchronous native call this process makes from here on holds the JavaScript thread: the longest
// one is a figure of its own, and the longest of each phase of the bench says where the long ones fall.
const blockingCalls = monitorBlockingCalls();
const longestByPhase: string[] = [];
/**
 * KVREUSE_BENCH_PHASES=caller,read runs only the phases whose names contain one of its words (e.g. to
 * look into facade.max_blocking_call_ms); such a partial run prints its figures and writes no file.
 */
const onlyPhases = process.env.KVREUSE_BENCH_PHASES?.split(',').filter((word) => word !== '');
const selected = (name: string): boolean => onlyPhases === undefined || onlyPhases.some((word) => name.includes(word));
/** `held 2.33 ms by kvt_xfer_post 2.33 ms wall, …`: the call that held the JavaScript thread longest. */
function describeHeld(call: BlockingCall | undefined): string {
  return call === undefined ? 'none' : `held ${call.heldMs.toFixed(2)} ms by ${describeBlockingCall(call)}`;
}
async function phase<T>(name: string, run: () => Promise<T>): Promise<T> {
  const monitor = monitorBlockingCalls();
  try {
    return await run();
  } finally {
    monitor.stop();
    const { longest, longestHeld } = monitor;
    longestByPhase.push(
      `${name}: ${describeHeld(longestHeld)}${longest === longestHeld || longest === undefined ? '' : `, wall ${describeBlockingCall(longest)}`}`,
    );
  }
}
const caps = transport.capabilities();
console.log(`library: ${caps.version} at ${caps.libraryPath}`);
// KVREUSE_BENCH_READS=4096,16384: only the read sweep's points of those sizes (bytes), printed; nothing written.
const onlyReads = process.env.KVREUSE_BENCH_READS?.split(',').map(Number);
if (onlyReads !== undefined) {
  const points = SWEEP.filter((point) => onlyReads.includes(point.size));
  if (points.length === 0)
    throw new Error(`KVREUSE_BENCH_READS names none of the sweep's sizes (${SWEEP.map((p) => p.size).join(', ')})`);
  await readsBySize(points);
  process.exit(0);
}
const LOOPBACK_POSTS = 'loopback posts of 100,000 descriptors';
const UCX_POSTS = 'ucx posts of 100,000 descriptors';
async function loopbackPosts(): Promise<Overhead> {
  const loopbackPair = await phase('loopback setup', () => openPair('loopback', OVERHEAD_BYTES, 5));
  return phase(LOOPBACK_POSTS, () =>
    postOverhead({
      agent: loopbackPair.reader,
      bank: loopbackPair.readerBank,
      region: loopbackPair.readerRegion,
      peer: loopbackPair.sourcePeer,
      remoteRegion: loopbackPair.sourceRegion.id,
      close: async () => loopbackPair.close(),
    }),
  );
}
const loopback = selected(LOOPBACK_POSTS) ? await loopbackPosts() : undefined;
if (loopback) console.log(`post.per_descriptor_ns: ${describeOverhead('loopback, one process', loopback)}`);

if (caps.backends.includes('ucx')) {
  const ucx = selected(UCX_POSTS)
    ? await phase(UCX_POSTS, async () => postOverhead(await remoteSource(OVERHEAD_BYTES, 5)))
    : undefined;
  if (ucx && loopback) {
    const perftestGetNs = (OVERHEAD_PIECE / (await ucxPerftest(OVERHEAD_PIECE, OVERHEAD_COUNT)).bytesPerSecond) * 1e9;
    figures['post.per_descriptor_ns'] = {
      value: ucx.perDescriptorNs,
      unit: 'ns',
      anchor: ucx.singleS * 1e3,
      goal: '≤ 100 ns',
      note:
        `anchor: ms to move the same 409.6 MB as one descriptor; best of ${REPEATS} each. ` +
        `${describeOverhead('ucx, two processes', ucx)} (ucx_perftest -t ucp_get: ${perftestGetNs.toFixed(0)} ns per 4 KiB get); ` +
        describeOverhead('loopback', loopback),
    };
    console.log(`post.per_descriptor_ns: ${describeOverhead('ucx, two processes', ucx)}`);
  }
  const remotePhases: [string, () => Promise<void>][] = [
    ['read sweep', readsBySize],
    ['qwen3 prefix pulls', pullQwen3Prefix],
    ['caller memory (file)', () => pullFromCallerMemory('file', 'read.caller_memory.vs_memcpy')],
    ['caller memory (anonymous)', () => pullFromCallerMemory('caller', 'read.caller_memory_anonymous.vs_memcpy')],
  ];
  for (const [name, run] of remotePhases) if (selected(name)) await phase(name, run);
  const TCP = 'tcp between namespaces';
  if (namespacesUnavailable === undefined) {
    if (selected(TCP)) await phase(TCP, pullOverTcpBetweenNamespaces);
  } else
    console.warn(`native-bindings bench: ${namespacesUnavailable}, so pull.tcp_netns.vs_ucx_perftest is not measured`);
} else if (loopback) {
  figures['post.per_descriptor_ns'] = {
    value: loopback.perDescriptorNs,
    unit: 'ns',
    anchor: loopback.singleS * 1e3,
    goal: '≤ 100 ns',
    note: `ucx not built, so measured on loopback only. ${describeOverhead('loopback', loopback)}`,
  };
  console.warn('native-bindings bench: ucx backend not built; the cross-process figures are not measured');
}

blockingCalls.stop();
const slowest = blockingCalls.longest;
const heldLongest = blockingCalls.longestHeld;
const byCall = blockingCalls.slowest(Number.POSITIVE_INFINITY);
// The posts are named whatever their rank: a post of 100,000 descriptors is the heaviest call of the hot path.
const posts = ['kvt_xfer_post', 'kvt_xfer_post_blocks'].map(
  (name) => byCall.find(({ call }) => call === name) ?? { call: name, ms: Number.NaN },
);
const calls = `the ${blockingCalls.calls} synchronous native calls this bench's process made through the facade (agent create and close, allocation, registration, metadata, peer loads, posts, polls, on loopback and ucx)`;
const endState = `load average ${loadavg()
  .map((load) => load.toFixed(1))
  .join(', ')} on ${cpus().length} cores at the end; the source processes' calls are not counted`;
figures['facade.max_blocking_call_ms'] = {
  value: heldLongest?.heldMs ?? 0,
  unit: 'ms',
  goal: '≤ 5',
  note:
    `the longest any of ${calls} held the JavaScript thread, working or asleep on a lock or on the agent's thread ` +
    `(read for calls over 1 ms: one that never blocked held it for its CPU time, while the rest of its wall-clock time the core ran another thread ` +
    `or the virtual CPU did not run; one that blocked for its wall-clock time less its wait for a core, the kernel's run-queue delay): ` +
    `${describeHeld(heldLongest)}; ` +
    `the longest of each phase: ${longestByPhase.join('; ')}; ${endState}`,
};
figures['facade.max_call_wall_ms'] = {
  value: slowest?.ms ?? 0,
  unit: 'ms',
  note:
    `the longest of ${calls} by wall-clock time, preemption included: ` +
    `${slowest === undefined ? 'none' : describeBlockingCall(slowest)} (next: ` +
    `${byCall.slice(1, 4).map(describeBlockingCall).join(', ')}; the longest posts: ${posts.map(describeBlockingCall).join(', ')}); ` +
    `for calls over 1 ms the thread's CPU time, its context switches (preempted: runnable, another thread had the core; blocked: a lock, ` +
    `a wait on the agent's thread), its wait for a core and the garbage collections V8 ran during the call; ${endState}`,
};
console.log(`facade.max_blocking_call_ms: ${figures['facade.max_blocking_call_ms'].note}`);
console.log(`facade.max_call_wall_ms: ${figures['facade.max_call_wall_ms'].note}`);

if (onlyPhases === undefined) {
  const out = join(dirname(fileURLToPath(import.meta.url)), '../../../bench/parts/native-bindings.json');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify({ figures, series }, null, 2)}\n`);
  console.log(`wrote ${out}`);
} else console.log(`KVREUSE_BENCH_PHASES=${onlyPhases.join(',')}: a partial run, no file written`);
