// Two processes in two network namespaces of one machine, UCX left to its default transports: it picks
// shared memory (sysv, posix), which namespaces do not separate. Its wake-up of an idle receiver does not
// cross them (a datagram to an abstract unix socket, which lives in the receiver's network namespace), so
// UCX's adaptive progress never read the writer's first message at the owner and every WRITE hung; the
// library polls every interface instead. Each WRITE has the writer's bound to complete in (writer.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ucxTestsRun } from './support/backends.js';
import { spawnScript } from './support/child.js';
import { namespaceTestsRun, openVethPair, type VethPair } from './support/netns.js';

/** WRITEs of one mebibyte, each to its own mebibyte of the owner's bank. */
const WRITES = 32;

describe.runIf(ucxTestsRun && namespaceTestsRun)(
  'two processes in two network namespaces, ucx left to its defaults',
  () => {
    let pair: VethPair;
    beforeAll(() => {
      pair = openVethPair();
    });
    afterAll(() => pair.close());

    it(`B WRITEs ${WRITES} mebibytes into A’s bank over shared memory, each completing, every byte landed`, async () => {
      const owner = spawnScript('test/netns-shm/owner.ts', { args: [String(WRITES)], launcher: pair.a.launcher });
      const writer = spawnScript('test/netns-shm/writer.ts', { args: [String(WRITES)], launcher: pair.b.launcher });
      try {
        writer.send(await owner.next('ready'));
        const outcome = await writer.next('wrote');
        expect(outcome['stalled'], 'the index of the first WRITE that did not complete in its bound').toBeNull();
        expect(String(outcome['transport'])).toMatch(/lane\[0\]:\s+\d+:(sysv|posix)\/memory/);
        expect(String(outcome['transport'])).toMatch(/mapped through shared memory/);
        owner.send({ command: 'verify' });
        expect(await owner.next('verified')).toEqual({ event: 'verified', wrong: [] });
        owner.send({ command: 'close' });
        expect(await writer.exited).toBe(0);
        expect(await owner.exited).toBe(0);
      } finally {
        owner.process.kill();
        writer.process.kill();
      }
    }, 120_000);
  },
);
