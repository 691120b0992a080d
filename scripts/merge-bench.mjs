#!/usr/bin/env node
// Merges the figures each package's benchmark wrote to bench/parts/<package>.json into
// bench/results.json (git-ignored). With --write-docs it also rewrites the table between the markers in
// the tracked docs/benchmarks.md and draws each series into docs/bench-<series>.svg; without it,
// measuring never dirties a checkout.
// A part is { "figures": { "<name>": { "value", "unit", "anchor"?, "ratio"?, "goal"?, "note"? } },
// "series"?: { "<series>": { "title", "sizes", "unit", "lines": [{ "label", "values" }], "loadAverage" } } }
// (scripts/bench-chart.mjs says what a series holds).
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { arch, cpus, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BadSeriesError, checkSeries, renderSeriesChart } from './bench-chart.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const partsDir = join(root, 'bench/parts');
const parts = existsSync(partsDir)
  ? readdirSync(partsDir)
      .filter((f) => f.endsWith('.json'))
      .sort()
  : [];
if (parts.length === 0) {
  console.error('merge-bench: no figures in bench/parts/: run the package benchmarks first');
  process.exit(1);
}

const figures = {};
const sourceOf = {};
const series = {};
const seriesSourceOf = {};
for (const file of parts) {
  const part = JSON.parse(readFileSync(join(partsDir, file), 'utf8'));
  for (const [name, figure] of Object.entries(part.figures ?? {})) {
    if (name in figures) {
      console.error(`merge-bench: figure ${name} is reported by both ${sourceOf[name]} and ${file}`);
      process.exit(1);
    }
    if (typeof figure.value !== 'number' || typeof figure.unit !== 'string') {
      console.error(`merge-bench: figure ${name} in ${file} needs a numeric value and a unit`);
      process.exit(1);
    }
    figures[name] = figure;
    sourceOf[name] = file.replace(/\.json$/, '');
  }
  for (const [name, drawn] of Object.entries(part.series ?? {})) {
    if (name in series) {
      console.error(`merge-bench: series ${name} is reported by both ${seriesSourceOf[name]} and ${file}`);
      process.exit(1);
    }
    if (!/^[a-z0-9-]+$/.test(name)) {
      console.error(
        `merge-bench: series ${name} in ${file} needs a name of lower-case letters, digits and dashes (it names docs/bench-<series>.svg)`,
      );
      process.exit(1);
    }
    try {
      checkSeries(name, drawn);
    } catch (error) {
      if (!(error instanceof BadSeriesError)) throw error;
      console.error(`merge-bench: ${error.message} (in ${file})`);
      process.exit(1);
    }
    series[name] = drawn;
    seriesSourceOf[name] = file.replace(/\.json$/, '');
  }
}

const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'unknown cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, ${arch()}, Node ${process.versions.node}`;
const measuredAt = new Date().toISOString();
mkdirSync(join(root, 'bench'), { recursive: true });
writeFileSync(
  join(root, 'bench/results.json'),
  `${JSON.stringify({ measuredAt, machine, figures, series }, null, 2)}\n`,
);

const format = (v) => {
  if (typeof v !== 'number') return v === undefined ? '' : String(v);
  return Number.isInteger(v) ? v.toLocaleString('en-US') : String(Number(v.toPrecision(4)));
};
const rows = Object.keys(figures)
  .sort()
  .map((name) => {
    const f = figures[name];
    return `| \`${name}\` | ${format(f.value)} | ${f.unit} | ${format(f.anchor)} | ${format(f.ratio)} | ${format(f.goal)} | ${sourceOf[name]} |`;
  });
const table = [
  `Measured ${measuredAt} on ${machine}.`,
  '',
  '| figure | value | unit | anchor | ratio | goal | package |',
  '|---|---|---|---|---|---|---|',
  ...rows,
].join('\n');

if (!process.argv.includes('--write-docs')) {
  console.log(
    `merge-bench: ${Object.keys(figures).length} figures from ${parts.length} packages → bench/results.json (docs/benchmarks.md untouched; --write-docs rewrites its table)`,
  );
  process.exit(0);
}

const docPath = join(root, 'docs/benchmarks.md');
const start = '<!-- figures:start -->';
const end = '<!-- figures:end -->';
const doc = readFileSync(docPath, 'utf8');
const from = doc.indexOf(start);
const to = doc.indexOf(end);
if (from < 0 || to < from) {
  console.error(`merge-bench: docs/benchmarks.md lacks the ${start} … ${end} markers`);
  process.exit(1);
}
writeFileSync(docPath, `${doc.slice(0, from + start.length)}\n${table}\n${doc.slice(to)}`);
const charts = Object.entries(series).map(([name, drawn]) => {
  const chart = `docs/bench-${name}.svg`;
  writeFileSync(join(root, chart), renderSeriesChart(name, drawn, { measuredAt, machine }));
  return chart;
});
console.log(
  `merge-bench: ${Object.keys(figures).length} figures from ${parts.length} packages → bench/results.json, ${['docs/benchmarks.md', ...charts].join(', ')}`,
);
