import type Database from 'better-sqlite3';
import { describe, expect, test } from 'vitest';
import { enterWalMode } from './sqlite-wal.js';

const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });

/** A connection whose switch to WAL mode throws each of `failures` in turn, then succeeds. */
function connectionFailing(...failures: Error[]) {
  const pragmas: string[] = [];
  const db = {
    pragma(source: string) {
      pragmas.push(source);
      const failure = failures.shift();
      if (failure !== undefined) throw failure;
      return 'wal';
    },
  };
  return { db: db as unknown as Database.Database, pragmas };
}

describe('enterWalMode', () => {
  test('retries the switch while another connection holds the write lock, until it is taken', () => {
    const { db, pragmas } = connectionFailing(busy, busy);
    enterWalMode(db, 60_000);
    expect(pragmas).toEqual(['journal_mode = WAL', 'journal_mode = WAL', 'journal_mode = WAL']);
  });

  test('throws any other error at once', () => {
    const corrupt = Object.assign(new Error('file is not a database'), { code: 'SQLITE_NOTADB' });
    const { db, pragmas } = connectionFailing(corrupt);
    expect(() => enterWalMode(db, 60_000)).toThrow(corrupt);
    expect(pragmas).toHaveLength(1);
  });

  test('gives up with SQLITE_BUSY once the busy timeout has passed', () => {
    const { db, pragmas } = connectionFailing(busy, busy);
    expect(() => enterWalMode(db, 0)).toThrow(busy);
    expect(pragmas).toHaveLength(1);
  });
});
