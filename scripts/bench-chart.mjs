// Draws a benchmark series (bandwidth by message size, one line per thing measured) as an SVG line
// chart for docs/: a log₂ size axis, a linear value axis from zero, each line with its own colour,
// dash and marker (readable without colour), a legend, a caption with the date, the machine and its
// load, and a <title>/<desc> that state every value for screen readers. No dependencies, like the
// other scripts of the repository.

/** A series the renderer cannot draw; `code` is BAD_SERIES and the message names what is wrong. */
export class BadSeriesError extends Error {
  code = 'BAD_SERIES';
  constructor(name, problem) {
    super(`bench series ${name}: ${problem}`);
    this.name = 'BadSeriesError';
  }
}

const WIDTH = 720;
const PLOT = { left: 72, right: 696, top: 56, bottom: 336 };
const LEGEND_TOP = 392;
const ROW = 20;
// Okabe–Ito colours, told apart with every common colour-vision deficiency.
const STYLES = [
  { colour: '#0072B2', dash: '', marker: 'circle' },
  { colour: '#D55E00', dash: '8 4', marker: 'square' },
  { colour: '#009E73', dash: '2 4', marker: 'diamond' },
];

/** Checks `series` (as a bench part writes it) and names the first thing wrong with it. */
export function checkSeries(name, series) {
  const fail = (problem) => {
    throw new BadSeriesError(name, problem);
  };
  if (typeof series !== 'object' || series === null) fail('is not an object');
  if (typeof series.title !== 'string' || series.title === '') fail('needs a title');
  if (typeof series.unit !== 'string' || series.unit === '') fail('needs the unit of its values');
  const { sizes, lines, loadAverage } = series;
  if (!Array.isArray(sizes) || sizes.length === 0) fail('needs at least one size');
  sizes.forEach((size, i) => {
    if (!Number.isFinite(size) || size <= 0)
      fail(`size ${i} is ${JSON.stringify(size)}, not a positive number of bytes`);
    if (i > 0 && size <= sizes[i - 1]) fail(`sizes must grow: ${sizes[i - 1]} is followed by ${size}`);
  });
  if (!Array.isArray(lines) || lines.length === 0) fail('needs at least one line');
  if (lines.length > STYLES.length) fail(`has ${lines.length} lines; at most ${STYLES.length} can be told apart`);
  for (const line of lines) {
    if (typeof line?.label !== 'string' || line.label === '') fail('has a line without a label');
    if (!Array.isArray(line.values) || line.values.length !== sizes.length) {
      fail(`line "${line.label}" needs one value per size (${sizes.length}), null where not measured`);
    }
    line.values.forEach((value, i) => {
      if (value !== null && !(Number.isFinite(value) && value >= 0)) {
        const shown = typeof value === 'number' ? String(value) : JSON.stringify(value);
        fail(`line "${line.label}" has ${shown} at ${sizes[i]} B: a value is a non-negative number or null`);
      }
    });
  }
  for (const when of ['start', 'end']) {
    if (!Number.isFinite(loadAverage?.[when])) fail(`needs the load average at its ${when}`);
  }
}

/** 4096 → "4 KiB", 1048576 → "1 MiB", 1536 → "1.5 KiB". */
export function formatBytes(bytes) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${Number(value.toPrecision(3))} ${units[unit]}`;
}

/** The smallest 1, 2, 2.5 or 5 × 10ⁿ at or above `rough`. */
function niceStep(rough) {
  const power = 10 ** Math.floor(Math.log10(rough));
  return power * ([1, 2, 2.5, 5, 10].find((factor) => factor * power >= rough) ?? 10);
}

/** Ticks from zero to at least `max`, about five of them. */
function valueTicks(max) {
  const step = niceStep(max > 0 ? max / 5 : 1);
  const count = Math.max(1, Math.ceil(max / step));
  return Array.from({ length: count + 1 }, (_, i) => Number((i * step).toPrecision(12)));
}

const escape = (text) =>
  String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const round = (n) => Number(n.toFixed(2));
const formatValue = (value) => String(Number(value.toPrecision(3)));

function markerPath(shape, x, y) {
  const r = 4.5;
  if (shape === 'circle') return `M${round(x - r)} ${round(y)}a${r} ${r} 0 1 0 ${2 * r} 0a${r} ${r} 0 1 0 ${-2 * r} 0Z`;
  if (shape === 'square') return `M${round(x - r)} ${round(y - r)}h${2 * r}v${2 * r}h${-2 * r}Z`;
  return `M${round(x)} ${round(y - r - 1)}l${r + 1} ${r + 1}l${-r - 1} ${r + 1}l${-r - 1} ${-r - 1}Z`;
}

/**
 * The elements of one line of a chart: its path through the measured points, a marker at each, and its
 * entry in the legend.
 */
function seriesElements(line, index, { sizes, unit, xOf, yOf }) {
  const style = STYLES[index];
  // A null value ends the run of points before it: the next measured point starts a new subpath.
  const path = line.values
    .map((value, i) => (value === null ? null : `${round(xOf(sizes[i]))} ${round(yOf(value))}`))
    .map((point, i, points) => (point === null ? '' : `${i > 0 && points[i - 1] !== null ? 'L' : 'M'}${point}`))
    .join('');
  const out = [`<g class="series" data-label="${escape(line.label)}">`];
  if (path !== '') {
    out.push(
      `<path class="line" d="${path}" fill="none" stroke="${style.colour}" stroke-width="2"${style.dash === '' ? '' : ` stroke-dasharray="${style.dash}"`}/>`,
    );
  }
  line.values.forEach((value, i) => {
    if (value === null) return;
    out.push(
      `<path class="marker" d="${markerPath(style.marker, xOf(sizes[i]), yOf(value))}" fill="${style.colour}"><title>${escape(`${line.label}, ${formatBytes(sizes[i])}: ${formatValue(value)} ${unit}`)}</title></path>`,
    );
  });
  out.push('</g>');
  const rowY = LEGEND_TOP + index * ROW;
  out.push(
    '<g class="legend-entry">',
    `<line x1="${PLOT.left}" x2="${PLOT.left + 40}" y1="${rowY}" y2="${rowY}" stroke="${style.colour}" stroke-width="2"${style.dash === '' ? '' : ` stroke-dasharray="${style.dash}"`}/>`,
    `<path d="${markerPath(style.marker, PLOT.left + 20, rowY)}" fill="${style.colour}"/>`,
    `<text x="${PLOT.left + 52}" y="${rowY + 4}">${escape(line.label)}</text>`,
    '</g>',
  );
  return out;
}

/**
 * The SVG document of series `name` (checked with checkSeries), captioned with when and on which
 * machine it was measured. A value that is null leaves a gap in its line.
 */
export function renderSeriesChart(name, series, { measuredAt, machine }) {
  checkSeries(name, series);
  const { title, unit, sizes, lines, loadAverage } = series;
  const measured = lines.flatMap((line) => line.values.filter((value) => value !== null));
  const ticks = valueTicks(Math.max(0, ...measured));
  const top = ticks[ticks.length - 1];
  const logMin = Math.log2(sizes[0]);
  const logSpan = Math.log2(sizes[sizes.length - 1]) - logMin;
  const inset = 24; // keeps the first and last markers off the axes
  const xOf = (size) =>
    logSpan === 0
      ? (PLOT.left + PLOT.right) / 2
      : PLOT.left + inset + ((Math.log2(size) - logMin) / logSpan) * (PLOT.right - PLOT.left - 2 * inset);
  const yOf = (value) => PLOT.bottom - (value / top) * (PLOT.bottom - PLOT.top);

  const captionTop = LEGEND_TOP + lines.length * ROW + 12;
  const height = captionTop + 2 * 16 + 8;
  const caption = [
    `Measured ${measuredAt} on ${machine}.`,
    `One-minute load average ${formatValue(loadAverage.start)} when the series started, ${formatValue(loadAverage.end)} when it ended.`,
  ];
  const description = lines
    .map((line) => {
      const points = line.values.map(
        (value, i) => `${formatBytes(sizes[i])} ${value === null ? 'not measured' : `${formatValue(value)} ${unit}`}`,
      );
      return `${line.label}: ${points.join(', ')}.`;
    })
    .join(' ');

  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-labelledby="chart-title chart-desc" font-family="sans-serif" font-size="12">`,
    `<title id="chart-title">${escape(title)}</title>`,
    `<desc id="chart-desc">${escape(`${description} ${caption.join(' ')}`)}</desc>`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text class="chart-title" x="${WIDTH / 2}" y="28" text-anchor="middle" font-size="16" font-weight="bold">${escape(title)}</text>`,
    '<g class="value-axis">',
    ...ticks.flatMap((tick) => [
      `<line x1="${PLOT.left}" x2="${PLOT.right}" y1="${round(yOf(tick))}" y2="${round(yOf(tick))}" stroke="${tick === 0 ? '#333333' : '#dddddd'}"/>`,
      `<text x="${PLOT.left - 8}" y="${round(yOf(tick) + 4)}" text-anchor="end">${formatValue(tick)}</text>`,
    ]),
    `<text class="axis-label" transform="translate(20 ${(PLOT.top + PLOT.bottom) / 2}) rotate(-90)" text-anchor="middle">bandwidth (${escape(unit)})</text>`,
    '</g>',
    '<g class="size-axis">',
    `<line x1="${PLOT.left}" x2="${PLOT.left}" y1="${PLOT.top}" y2="${PLOT.bottom}" stroke="#333333"/>`,
    ...sizes.flatMap((size) => [
      `<line x1="${round(xOf(size))}" x2="${round(xOf(size))}" y1="${PLOT.bottom}" y2="${PLOT.bottom + 5}" stroke="#333333"/>`,
      `<text x="${round(xOf(size))}" y="${PLOT.bottom + 20}" text-anchor="middle">${formatBytes(size)}</text>`,
    ]),
    `<text class="axis-label" x="${(PLOT.left + PLOT.right) / 2}" y="${PLOT.bottom + 44}" text-anchor="middle">message size (log scale)</text>`,
    '</g>',
  ];
  lines.forEach((line, index) => out.push(...seriesElements(line, index, { sizes, unit, xOf, yOf })));
  out.push(
    ...caption.map(
      (text, i) =>
        `<text class="caption" x="${PLOT.left}" y="${captionTop + i * 16}" font-size="11" fill="#444444">${escape(text)}</text>`,
    ),
    '</svg>',
  );
  return `${out.join('\n')}\n`;
}
