// File-backed caller memory read by another process on the same host: the reader maps the source's memfd
// and copies the READ itself (counted in fileReadBytes, no UCX request), and gets the source's bytes.
import { afterEach, describe, expect, it } from 'vitest';
import { agentName, transport, ucxTestsRun } from './support/backends.js';
import { type Child, spawnScript } from './support/child.js';
import { findPatternMismatch, piecewiseDescriptors } from './support/content.js';
import { allZero, liveCounters } from './support/pair.js';

const BYTES = 1 << 20;
const SEED = 17;

const children: Child[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) {
    child.process.kill('SIGKILL');
    await child.exited;
  }
});

describe.runIf(ucxTestsRun)('file-backed caller memory of another process', () => {
  it('is read through its mapped file, verified and counted', async () => {
    const child = spawnScript('test/support/source-process.ts', {
      args: [agentName('file-source'), String(BYTES), String(SEED), 'file'],
    });
    children.push(child);
    const published = await child.next<{ metadata: string; region: number }>('ready');
    const reader = await transport.createAgent({ name: agentName('file-reader'), backend: 'ucx' });
    const bank = await reader.allocate(BYTES);
    bank.view().fill(0);
    const region = reader.register(bank);
    const peer = reader.loadPeer(Buffer.from(published.metadata, 'base64'));
    expect(peer.transport()).toContain('its file mapped, READs copied directly');
    const operation = reader.post({
      direction: 'read',
      peer,
      descriptors: piecewiseDescriptors(1, BYTES),
      localRegions: [region],
      remoteRegions: [published.region],
    });
    await expect(operation.done).resolves.toMatchObject({ bytesDone: BYTES });
    operation.release();
    expect(findPatternMismatch(bank.view(), SEED)).toBe(-1);
    expect(reader.counters()).toMatchObject({ fileReadBytes: BYTES, requestsIssued: 0 });
    peer.unload();
    await region.deregister();
    await bank.free();
    await reader.close();
    child.send({ command: 'close' });
    await child.next('closed');
    await child.exited;
    expect(liveCounters()).toEqual(allZero);
  });
});
