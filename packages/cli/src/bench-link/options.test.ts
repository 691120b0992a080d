import { describe, expect, it } from 'vitest';
import { splitArgs } from '../args.js';
import { UsageError } from '../errors.js';
import { defaultPort, linkOptions, linkPlanOf, maxMessageBytes, parsePeer, parseSize, parseSizes } from './options.js';

const planOf = (...argv: string[]) => linkPlanOf(splitArgs('bench link', argv, linkOptions));

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as UsageError).message;
  }
  throw new Error('it was not refused');
}

describe('message sizes', () => {
  it.each([
    ['1', 1],
    ['4096', 4096],
    ['4k', 4096],
    ['64K', 65_536],
    ['4m', 4 * 2 ** 20],
    ['1g', 2 ** 30],
  ])('%s is %d bytes', (text, bytes) => expect(parseSize(text)).toBe(bytes));

  it.each(['0', '', 'k', '4kb', '4 k', '1.5m', '-4', '2g', '4t', '0x10'])('%j is refused, naming it', (text) => {
    expect(refusal(() => parseSize(text))).toBe(
      `bench link: --sizes: ${JSON.stringify(text)} is not a message size from 1 byte to 1g (bytes, or a number with k, m or g) (see kvreuse bench link --help)`,
    );
  });

  it('a list keeps its order; a size given twice, in any spelling, is refused', () => {
    expect(parseSizes('4m,4k,64k')).toEqual([4 * 2 ** 20, 4096, 65_536]);
    expect(refusal(() => parseSizes('4k,4096'))).toContain('--sizes: 4096 bytes is given more than once');
    expect(maxMessageBytes).toBe(2 ** 30);
  });
});

describe('the peer of --connect', () => {
  it('is host:port, or [v6 address]:port', () => {
    expect(parsePeer('10.0.0.2:13700')).toEqual({ host: '10.0.0.2', port: 13_700 });
    expect(parsePeer('node-b.example:1')).toEqual({ host: 'node-b.example', port: 1 });
    expect(parsePeer('[fe80::1]:65535')).toEqual({ host: 'fe80::1', port: 65_535 });
  });

  it.each(['10.0.0.2', '10.0.0.2:0', '10.0.0.2:65536', ':13700', 'fe80::1:13700', 'host:port', '10.0.0.2:13700x'])(
    '%j is refused',
    (text) => {
      expect(refusal(() => parsePeer(text))).toContain(
        `--connect is host:port (or [v6 address]:port) with a port from 1 to 65535, not ${JSON.stringify(text)}`,
      );
    },
  );
});

describe('linkPlanOf', () => {
  it('--listen: every address on the default port, waiting for a peer until interrupted', () => {
    expect(planOf('--listen')).toEqual({
      role: 'listen',
      address: '0.0.0.0',
      port: defaultPort,
      connectTimeoutMs: undefined,
      timeoutMs: 10_000,
    });
    expect(planOf('--listen', '--address', '10.0.0.1', '--port', '0', '--timeout', '30')).toEqual({
      role: 'listen',
      address: '10.0.0.1',
      port: 0,
      connectTimeoutMs: 30_000,
      timeoutMs: 30_000,
    });
  });

  it('--listen --address that is not an IP address: a usage error naming --address and the value', () => {
    expect(refusal(() => planOf('--listen', '--address', 'notanip'))).toBe(
      'bench link: --address "notanip" is not an IP address of this host (an IPv4 or IPv6 address, such as 0.0.0.0) (see kvreuse bench link --help)',
    );
    expect(planOf('--listen', '--address', '::1')).toMatchObject({ address: '::1' });
  });

  it('--connect: the defaults, then every option', () => {
    expect(planOf('--connect', 'b:1')).toEqual({
      role: 'connect',
      host: 'b',
      port: 1,
      sizes: [4096, 65_536, 2 ** 20, 4 * 2 ** 20],
      iterations: 1000,
      warmup: 100,
      inFlight: 1,
      directions: ['read', 'write'],
      timeoutMs: 10_000,
      format: undefined,
    });
    expect(
      planOf(
        '--connect=b:2',
        '--sizes',
        '8,1m',
        '--iterations',
        '5',
        '--warmup',
        '0',
        '--in-flight',
        '4',
        '--directions',
        'write',
        '--timeout',
        '3',
        '-o',
        'json',
      ),
    ).toMatchObject({
      sizes: [8, 2 ** 20],
      iterations: 5,
      warmup: 0,
      inFlight: 4,
      directions: ['write'],
      timeoutMs: 3000,
      format: 'json',
    });
    expect(planOf('--connect', 'b:1', '--directions', 'write,read', '--json')).toMatchObject({
      directions: ['read', 'write'],
      format: 'json',
    });
  });

  it.each([
    [[], 'give --listen (this side waits) or --connect <host:port>'],
    [['--listen', '--connect', 'b:1'], '--listen and --connect are the two sides; give one'],
    [['--listen', 'extra'], 'unexpected argument "extra"'],
    [['--listen', '--sizes', '4k'], '--sizes is for --connect'],
    [['--listen', '-o', 'json'], '--output is for --connect'],
    [['--listen', '--port', '65536'], '--port is a whole number from 0 to 65535, not "65536"'],
    [['--listen', '--timeout', '86401'], '--timeout is a whole number from 1 to 86400, not "86401"'],
    [['--connect', 'b:1', '--port', '2'], '--port is for --listen (the port of --connect is in host:port)'],
    [['--connect', 'b:1', '--iterations', '0'], '--iterations is a whole number from 1 to 1000000000, not "0"'],
    [['--connect', 'b:1', '--warmup', '-1'], '--warmup is a whole number from 0 to 1000000000, not "-1"'],
    [['--connect', 'b:1', '--in-flight', '2000'], '--in-flight is a whole number from 1 to 1024, not "2000"'],
    [['--connect', 'b:1', '--directions', 'read,put'], '--directions is read, write or read,write, not "read,put"'],
    [['--connect', 'b:1', '--directions', 'read,read'], '--directions is read, write or read,write, not "read,read"'],
    [['--connect', 'b:1', '--timeout', '0'], '--timeout is a whole number from 1 to 86400, not "0"'],
    [['--connect', 'b:1', '-o', 'csv'], '-o must be one of table, json, yaml; got "csv"'],
  ])('%j is refused: %s', (argv, problem) => {
    expect(refusal(() => planOf(...argv))).toBe(`bench link: ${problem} (see kvreuse bench link --help)`);
  });
});
