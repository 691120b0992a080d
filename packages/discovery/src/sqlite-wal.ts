import type Database from 'better-sqlite3';

const retryPause = new Int32Array(new SharedArrayBuffer(4));
const retryPauseMs = 5;

const isBusy = (error: unknown): boolean =>
  typeof (error as { code?: unknown } | null)?.code === 'string' &&
  (error as { code: string }).code.startsWith('SQLITE_BUSY');

/**
 * Puts the database in write-ahead-log mode, retrying for up to `busyTimeoutMs`. SQLite refuses the switch
 * with SQLITE_BUSY at once, without waiting in its busy handler, while another connection holds a write
 * lock on a file not yet in WAL mode: what happens when several processes open one new discovery file
 * together, one of them already creating the schema.
 */
export function enterWalMode(db: Database.Database, busyTimeoutMs: number): void {
  const deadline = performance.now() + busyTimeoutMs;
  for (;;) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if (!isBusy(error) || performance.now() >= deadline) throw error;
    }
    Atomics.wait(retryPause, 0, 0, retryPauseMs);
  }
}
