import { describe, expect, it } from 'vitest';
import type { LinkMeasurement } from './measure.js';
import { type LinkReport, lanesOf, renderLinkTable, sizeText } from './report.js';

// As the native library words a UCX endpoint over tcp (ucp_ep_print_info, then its own line).
const tcpEndpoint =
  '#\n# UCP endpoint \n#\n#               peer: <no debug data>\n' +
  '#                 lane[0]:  0:tcp/veth-kvreuse.0 md[0]                -> md[0]/tcp/sysdev[255] am am_bw#0 keepalive wireup\n' +
  '#                 lane[1]:  1:tcp/veth-kvreuse.0 md[0]                -> md[0]/tcp/sysdev[255] rma_bw#0\n' +
  "#\nkvreuse: region 1 of 'kvreuse-bench-listen-1': gets and puts through UCX\n";

const row = (direction: 'read' | 'write', bytes: number): LinkMeasurement => ({
  direction,
  bytes,
  iterations: 1000,
  latencyMedianUs: 12.345,
  latencyAverageUs: 15,
  bytesPerSecond: 1.5e9,
  messagesPerSecond: 1.5e9 / bytes,
});

const report: LinkReport = {
  peer: '10.77.0.1:13700',
  transport: tcpEndpoint,
  lanes: lanesOf(tcpEndpoint),
  warmup: 100,
  inFlight: 1,
  verified: true,
  results: [row('read', 4096), row('read', 4 * 2 ** 20), row('write', 1000)],
};

describe('lanesOf', () => {
  it('names each lane of a UCX endpoint report once, as transport/device; none when it names none', () => {
    expect(lanesOf(tcpEndpoint)).toEqual(['tcp/veth-kvreuse.0']);
    expect(lanesOf('loopback: same process\n')).toEqual([]);
  });
});

describe('sizeText', () => {
  it.each([
    [1, '1 B'],
    [1000, '1000 B'],
    [4096, '4 KiB'],
    [6144, '6 KiB'],
    [2 ** 20, '1 MiB'],
    [2 ** 20 + 1, '1048577 B'],
    [2 ** 30, '1 GiB'],
  ])('%d bytes: %s', (bytes, text) => expect(sizeText(bytes)).toBe(text));
});

describe('the report', () => {
  it('as a document: every quantity has its unit in its name', () => {
    expect(Object.keys(report).sort()).toEqual(
      ['inFlight', 'lanes', 'peer', 'results', 'transport', 'verified', 'warmup'].sort(),
    );
    expect(Object.keys(report.results[0]!).sort()).toEqual(
      [
        'bytes',
        'bytesPerSecond',
        'direction',
        'iterations',
        'latencyAverageUs',
        'latencyMedianUs',
        'messagesPerSecond',
      ].sort(),
    );
  });

  it('as a table: a heading, one aligned row per size and direction with explicit units, then what the units mean', () => {
    expect(renderLinkTable(report)).toBe(
      [
        'kvreuse bench link to 10.77.0.1:13700: lanes tcp/veth-kvreuse.0; 1 in flight, 100 warm-up messages per row; bytes read verified',
        'direction    size    bytes  iterations  latency median (µs)  latency avg (µs)  bandwidth (GB/s)  message rate (msg/s)',
        'read        4 KiB     4096        1000                12.35             15.00             1.500                366211',
        'read        4 MiB  4194304        1000                12.35             15.00             1.500                   358',
        'write      1000 B     1000        1000                12.35             15.00             1.500               1500000',
        'GB/s is 10^9 bytes per second; latency is each message from its post to its completion.',
        '',
      ].join('\n'),
    );
  });

  it('says when the lanes are not reported and leaves out the check when nothing was read', () => {
    const heading = renderLinkTable({ ...report, lanes: [], verified: false }).split('\n')[0];
    expect(heading).toBe(
      'kvreuse bench link to 10.77.0.1:13700: lanes not reported; 1 in flight, 100 warm-up messages per row',
    );
  });
});
