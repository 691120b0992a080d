// scripts/bench-chart.mjs (the bandwidth chart `pnpm bench --write-docs` draws into docs/), parsed as
// the XML it must be and read back: its lines, axes, caption and text alternative.
import { DOMParser, type Element } from '@xmldom/xmldom';
import { describe, expect, it } from 'vitest';
import {
  BadSeriesError,
  type BenchSeries,
  checkSeries,
  formatBytes,
  renderSeriesChart,
} from '../../../scripts/bench-chart.mjs';

const measured = { measuredAt: '2026-12-01T09:00:00.000Z', machine: '2 × AMD EPYC, 24 GiB, x64, Node 20.20.2' };

function sweep(overrides: Partial<BenchSeries> = {}): BenchSeries {
  return {
    title: 'READ bandwidth by message size',
    sizes: [4096, 65_536, 1_048_576, 4_194_304],
    unit: 'GB/s',
    lines: [
      { label: 'kvreuse read (facade)', values: [2.5, 20, 30, 40] },
      { label: 'ucx_perftest -t ucp_get', values: [5, null, 45, 50] },
      { label: 'memcpy (Buffer.copy, one thread)', values: [12, 14, 15, 11] },
    ],
    loadAverage: { start: 1.25, end: 2.5 },
    ...overrides,
  };
}

/** Parses `svg`, failing on any warning or error of the parser, not only on fatal ones. */
function parse(svg: string): Element {
  const document = new DOMParser({
    onError: (level, message) => {
      throw new Error(`${level}: ${message}`);
    },
  }).parseFromString(svg, 'image/svg+xml');
  const root = document.documentElement;
  if (root === null) throw new Error('no root element');
  return root;
}

const elements = (root: Element, tag: string): Element[] => Array.from(root.getElementsByTagName(tag));
const byClass = (root: Element, tag: string, className: string): Element[] =>
  elements(root, tag).filter((element) => element.getAttribute('class') === className);
const text = (element: Element): string => element.textContent ?? '';

/** The subpaths of a path's `d` (M…L…L…), each as its [x, y] points. */
function subpaths(d: string): [number, number][][] {
  return d
    .split('M')
    .filter((part) => part !== '')
    .map((part) =>
      part.split('L').map((point) => {
        const [x, y] = point.trim().split(/\s+/).map(Number);
        return [x ?? Number.NaN, y ?? Number.NaN];
      }),
    );
}

/** Every number in every coordinate-bearing attribute of the document. */
function coordinates(root: Element): string[] {
  return elements(root, '*').flatMap((element) =>
    ['x', 'y', 'x1', 'x2', 'y1', 'y2', 'd', 'transform', 'width', 'height', 'viewBox']
      .map((name) => element.getAttribute(name))
      .filter((value): value is string => value !== null),
  );
}

describe('renderSeriesChart', () => {
  const root = parse(renderSeriesChart('bandwidth', sweep(), measured));
  const series = byClass(root, 'g', 'series');
  const lineOf = (label: string) => {
    const group = series.find((g) => g.getAttribute('data-label') === label);
    if (group === undefined) throw new Error(`no series ${label}`);
    return byClass(group, 'path', 'line')[0]?.getAttribute('d') ?? '';
  };

  it('is an SVG image named by its title and described by a text that states every value', () => {
    expect(root.tagName).toBe('svg');
    expect(root.namespaceURI).toBe('http://www.w3.org/2000/svg');
    expect(root.getAttribute('role')).toBe('img');
    expect(root.getAttribute('aria-labelledby')).toBe('chart-title chart-desc');
    expect(text(elements(root, 'title')[0]!)).toBe('READ bandwidth by message size');
    const description = text(elements(root, 'desc')[0]!);
    expect(description).toContain(
      'kvreuse read (facade): 4 KiB 2.5 GB/s, 64 KiB 20 GB/s, 1 MiB 30 GB/s, 4 MiB 40 GB/s.',
    );
    expect(description).toContain(
      'ucx_perftest -t ucp_get: 4 KiB 5 GB/s, 64 KiB not measured, 1 MiB 45 GB/s, 4 MiB 50 GB/s.',
    );
  });

  it('draws the three series, each in the legend under its label', () => {
    expect(series.map((g) => g.getAttribute('data-label'))).toEqual([
      'kvreuse read (facade)',
      'ucx_perftest -t ucp_get',
      'memcpy (Buffer.copy, one thread)',
    ]);
    const legend = byClass(root, 'g', 'legend-entry').map((entry) => text(elements(entry, 'text')[0]!));
    expect(legend).toEqual(['kvreuse read (facade)', 'ucx_perftest -t ucp_get', 'memcpy (Buffer.copy, one thread)']);
    expect(subpaths(lineOf('kvreuse read (facade)'))).toHaveLength(1);
    expect(subpaths(lineOf('kvreuse read (facade)'))[0]).toHaveLength(4);
  });

  it('labels both axes: sizes at log-spaced ticks, bandwidth from zero in its unit', () => {
    const sizeAxis = byClass(root, 'g', 'size-axis')[0]!;
    const sizeTicks = elements(sizeAxis, 'text').filter((t) => t.getAttribute('class') !== 'axis-label');
    expect(sizeTicks.map(text)).toEqual(['4 KiB', '64 KiB', '1 MiB', '4 MiB']);
    // 4 KiB → 64 KiB is four doublings, 64 KiB → 1 MiB four more, 1 MiB → 4 MiB two.
    const [a, b, c, d] = sizeTicks.map((t) => Number(t.getAttribute('x')));
    expect((b! - a!) / (d! - c!)).toBeCloseTo(2, 1);
    expect((c! - b!) / (d! - c!)).toBeCloseTo(2, 1);
    expect(text(byClass(sizeAxis, 'text', 'axis-label')[0]!)).toBe('message size (log scale)');

    const valueAxis = byClass(root, 'g', 'value-axis')[0]!;
    expect(text(byClass(valueAxis, 'text', 'axis-label')[0]!)).toBe('bandwidth (GB/s)');
    const valueTicks = elements(valueAxis, 'text')
      .filter((t) => t.getAttribute('class') !== 'axis-label')
      .map(text);
    expect(valueTicks).toEqual(['0', '10', '20', '30', '40', '50']);
  });

  it('puts each point at its value on the axis ticks', () => {
    const valueAxis = byClass(root, 'g', 'value-axis')[0]!;
    const tickY = new Map(elements(valueAxis, 'text').map((t) => [text(t), Number(t.getAttribute('y')) - 4]));
    const [points] = subpaths(lineOf('memcpy (Buffer.copy, one thread)'));
    const sizeTickX = elements(byClass(root, 'g', 'size-axis')[0]!, 'text').map((t) => Number(t.getAttribute('x')));
    expect(points!.map(([x]) => x)).toEqual(sizeTickX.slice(0, 4));
    // 12, 14, 15 and 11 GB/s, between the ticks at 10 and 20.
    const per = (tickY.get('10')! - tickY.get('20')!) / 10;
    expect(points!.map(([, y]) => Number(((tickY.get('0')! - y) / per).toFixed(1)))).toEqual([12, 14, 15, 11]);
  });

  it('leaves a gap where a value is missing, not a point at zero', () => {
    const parts = subpaths(lineOf('ucx_perftest -t ucp_get'));
    expect(parts.map((part) => part.length)).toEqual([1, 2]);
    const sizeTickX = elements(byClass(root, 'g', 'size-axis')[0]!, 'text').map((t) => Number(t.getAttribute('x')));
    const drawnX = parts.flat().map(([x]) => x);
    expect(drawnX).toEqual([sizeTickX[0], sizeTickX[2], sizeTickX[3]]);
    const group = series.find((g) => g.getAttribute('data-label') === 'ucx_perftest -t ucp_get')!;
    expect(byClass(group, 'path', 'marker').map((marker) => text(elements(marker, 'title')[0]!))).toEqual([
      'ucx_perftest -t ucp_get, 4 KiB: 5 GB/s',
      'ucx_perftest -t ucp_get, 1 MiB: 45 GB/s',
      'ucx_perftest -t ucp_get, 4 MiB: 50 GB/s',
    ]);
  });

  it('captions the date, the machine and its load', () => {
    expect(byClass(root, 'text', 'caption').map(text)).toEqual([
      'Measured 2026-12-01T09:00:00.000Z on 2 × AMD EPYC, 24 GiB, x64, Node 20.20.2.',
      'One-minute load average 1.25 when the series started, 2.5 when it ended.',
    ]);
  });

  it('has no NaN or infinite coordinate, even for a single size or nothing measured', () => {
    const charts = [
      sweep(),
      sweep({ sizes: [131_072], lines: [{ label: 'one point', values: [7] }] }),
      sweep({ sizes: [4096, 8192], lines: [{ label: 'nothing measured', values: [null, null] }] }),
    ];
    for (const chart of charts) {
      const values = coordinates(parse(renderSeriesChart('bandwidth', chart, measured)));
      expect(values.length).toBeGreaterThan(0);
      expect(values.filter((value) => /NaN|Infinity/.test(value))).toEqual([]);
    }
  });

  it('escapes labels and captions as XML text', () => {
    const chart = sweep({ title: 'a < b & "c"', lines: [{ label: '<script>', values: [1, 2, 3, 4] }] });
    const root = parse(renderSeriesChart('bandwidth', chart, { measuredAt: 'now', machine: 'm&m' }));
    expect(text(elements(root, 'title')[0]!)).toBe('a < b & "c"');
    expect(byClass(root, 'g', 'series')[0]!.getAttribute('data-label')).toBe('<script>');
    expect(elements(root, 'script')).toEqual([]);
    expect(text(byClass(root, 'text', 'caption')[0]!)).toBe('Measured now on m&m.');
  });
});

describe('checkSeries', () => {
  it.each([
    ['no title', { title: '' }, 'bench series bandwidth: needs a title'],
    ['no sizes', { sizes: [] }, 'bench series bandwidth: needs at least one size'],
    [
      'a size of zero',
      { sizes: [0, 4096, 8192, 16_384] },
      'bench series bandwidth: size 0 is 0, not a positive number of bytes',
    ],
    [
      'sizes out of order',
      { sizes: [4096, 1024, 8192, 16_384] },
      'bench series bandwidth: sizes must grow: 4096 is followed by 1024',
    ],
    [
      'too few values',
      { lines: [{ label: 'short', values: [1, 2] }] },
      'bench series bandwidth: line "short" needs one value per size (4), null where not measured',
    ],
    [
      'a NaN value',
      { lines: [{ label: 'nan', values: [1, Number.NaN, 3, 4] }] },
      'bench series bandwidth: line "nan" has NaN at 65536 B: a value is a non-negative number or null',
    ],
    [
      'a negative value',
      { lines: [{ label: 'neg', values: [1, -2, 3, 4] }] },
      'bench series bandwidth: line "neg" has -2 at 65536 B: a value is a non-negative number or null',
    ],
    [
      'a line without a label',
      { lines: [{ label: '', values: [1, 2, 3, 4] }] },
      'bench series bandwidth: has a line without a label',
    ],
    [
      'more lines than styles',
      { lines: Array.from({ length: 4 }, (_, i) => ({ label: `l${i}`, values: [1, 2, 3, 4] })) },
      'bench series bandwidth: has 4 lines; at most 3 can be told apart',
    ],
    [
      'no load average at its end',
      { loadAverage: { start: 1 } as BenchSeries['loadAverage'] },
      'bench series bandwidth: needs the load average at its end',
    ],
  ])('refuses a series with %s, naming it', (_, overrides, message) => {
    const bad = sweep(overrides as Partial<BenchSeries>);
    expect(() => checkSeries('bandwidth', bad)).toThrow(BadSeriesError);
    expect(() => checkSeries('bandwidth', bad)).toThrow(expect.objectContaining({ code: 'BAD_SERIES', message }));
  });

  it('accepts the series renderSeriesChart draws', () => {
    expect(() => checkSeries('bandwidth', sweep())).not.toThrow();
  });
});

describe('formatBytes', () => {
  it.each([
    [512, '512 B'],
    [4096, '4 KiB'],
    [1536, '1.5 KiB'],
    [131_072, '128 KiB'],
    [4_194_304, '4 MiB'],
  ])('%i bytes → %s', (bytes, expected) => {
    expect(formatBytes(bytes)).toBe(expected);
  });
});
