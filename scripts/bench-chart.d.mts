// Types of bench-chart.mjs, for the tests in tools/repo-checks.
export interface BenchSeries {
  title: string;
  sizes: number[];
  unit: string;
  lines: { label: string; values: (number | null)[] }[];
  loadAverage: { start: number; end: number };
}
export class BadSeriesError extends Error {
  readonly code: 'BAD_SERIES';
  constructor(name: string, problem: string);
}
export function checkSeries(name: string, series: unknown): asserts series is BenchSeries;
export function formatBytes(bytes: number): string;
export function renderSeriesChart(
  name: string,
  series: BenchSeries,
  measured: { measuredAt: string; machine: string },
): string;
