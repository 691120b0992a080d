// What `kvreuse bench link --connect` prints: one row per size and direction, as ucx_perftest prints
// its results (size, iterations, latency, bandwidth, message rate), or the same as one document.
import type { LinkMeasurement } from './measure.js';

/** The document `-o json|yaml` prints. Every quantity's unit is in its name: bytes, microseconds, per second. */
export interface LinkReport {
  /** The listener, as `--connect` named it. */
  readonly peer: string;
  /** How this side reaches the peer, in the native library's words (UCX: the endpoint's lanes). */
  readonly transport: string;
  /** The lanes of `transport`, `<transport>/<device>` each (e.g. `tcp/eth1`, `rc_mlx5/mlx5_0:1`); empty when it names none. */
  readonly lanes: readonly string[];
  readonly warmup: number;
  readonly inFlight: number;
  /** Whether the bytes read were checked against what the listener wrote into its region (a mismatch fails the run); false when nothing was read. */
  readonly verified: boolean;
  readonly results: readonly LinkMeasurement[];
}

/** The lanes a UCX endpoint report names (`lane[0]:  1:tcp/eth1.0 md[1] …` gives `tcp/eth1.0`), each once. */
export function lanesOf(transport: string): string[] {
  return [...new Set([...transport.matchAll(/lane\[\d+\]:\s+\d+:(\S+)/g)].map((match) => match[1]!))];
}

const units = [
  [2 ** 30, 'GiB'],
  [2 ** 20, 'MiB'],
  [2 ** 10, 'KiB'],
] as const;

/** `4096` as `4 KiB`, `1048576` as `1 MiB`; a size that is no whole multiple stays in bytes (`1000 B`). */
export function sizeText(bytes: number): string {
  const [unit, name] = units.find(([unit]) => bytes >= unit && bytes % unit === 0) ?? [1, 'B'];
  return `${bytes / unit} ${name}`;
}

const columns = [
  ['direction', (row: LinkMeasurement) => row.direction],
  ['size', (row: LinkMeasurement) => sizeText(row.bytes)],
  ['bytes', (row: LinkMeasurement) => String(row.bytes)],
  ['iterations', (row: LinkMeasurement) => String(row.iterations)],
  ['latency median (µs)', (row: LinkMeasurement) => row.latencyMedianUs.toFixed(2)],
  ['latency avg (µs)', (row: LinkMeasurement) => row.latencyAverageUs.toFixed(2)],
  ['bandwidth (GB/s)', (row: LinkMeasurement) => (row.bytesPerSecond / 1e9).toFixed(3)],
  ['message rate (msg/s)', (row: LinkMeasurement) => row.messagesPerSecond.toFixed(0)],
] as const;

/** The report as a table for people: a heading, then one right-aligned row per size and direction. GB is 10⁹ bytes. */
export function renderLinkTable(report: LinkReport): string {
  const cells = [columns.map(([title]) => title), ...report.results.map((row) => columns.map(([, cell]) => cell(row)))];
  const widths = columns.map((_, index) => Math.max(...cells.map((row) => row[index]!.length)));
  const lines = cells.map((row) =>
    row.map((cell, index) => (index === 0 ? cell.padEnd(widths[index]!) : cell.padStart(widths[index]!))).join('  '),
  );
  const lanes = report.lanes.length === 0 ? 'not reported' : report.lanes.join(', ');
  return [
    `kvreuse bench link to ${report.peer}: lanes ${lanes}; ${report.inFlight} in flight, ${report.warmup} warm-up messages per row${report.verified ? '; bytes read verified' : ''}`,
    ...lines,
    'GB/s is 10^9 bytes per second; latency is each message from its post to its completion.',
    '',
  ].join('\n');
}
