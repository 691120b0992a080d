import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { RankPart } from '@kvreuse/descriptors';
import { type Agent, type Backend, HandleClosedError } from '@kvreuse/native-bindings';
import { ClusterSecret } from '@kvreuse/discovery';
import { afterEach, describe, expect, it } from 'vitest';
import { testGeometry, transport } from '../test/support/endpoint-workers.js';
import { type AgentMetadata, signedTestParts } from '../test/workers.js';
import { PullRefusedError } from './errors.js';
import { RemotePeers } from './remote-peers.js';
import { loadSourcePeer, loadSourcePeers } from './source-peer.js';

// Like pull-ucx.test.ts: the ucx cases are skipped where UCX is not built, except under CI, which requires it.
const inCi = !['', '0', 'false', undefined].includes(process.env['CI']);
const ucxTestsRun = inCi || transport.capabilities().backends.includes('ucx');
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const secret = ClusterSecret.ofThisProcess();

const agents: Agent[] = [];
afterEach(async () => {
  for (const agent of agents.splice(0).reverse()) if (agent.isOpen) await agent.close();
  expect(transport.counters()).toMatchObject({ liveAgents: 0, livePeers: 0 });
});

let sequence = 0;
async function createAgent(backend: Backend = 'loopback'): Promise<Agent> {
  sequence += 1;
  const agent = await transport.createAgent({ name: `source-peer-${backend}-${process.pid}-${sequence}`, backend });
  agents.push(agent);
  return agent;
}

/** Rank tp 0 of worker `source-0` as discovery lists it, carrying `agent`'s metadata signed for it. */
const partOf = (agent: AgentMetadata): RankPart =>
  signedTestParts(testGeometry, 'source-0', [agent], secret)[0] as RankPart;

/** What loading `part` throws. */
async function refusalOf(reader: Agent, part: RankPart): Promise<unknown> {
  try {
    await loadSourcePeer(reader, part, secret);
  } catch (error) {
    return error;
  }
  throw new Error('the peer loaded');
}

/** A pull refusal for `reason` that names the rank and the native status, with the NativeTransportError as cause. */
const refusal = (reason: string, code: string, detail: RegExp) =>
  expect.objectContaining({
    code: 'PULL_REFUSED',
    reason,
    message: expect.stringMatching(
      new RegExp(`^pull refused \\(${reason}\\): source-0 tp 0 pp 0: .*kvt_peer_load failed with ${code}: `),
    ),
    cause: expect.objectContaining({
      name: 'NativeTransportError',
      code,
      call: 'kvt_peer_load',
      detail: expect.stringMatching(detail),
    }),
  });

let goneProcess: Promise<Partial<Record<Backend, AgentMetadata>>> | undefined;

/** The names and metadata of the agents of a process that has exited (test/process/gone-agents.ts), by backend; started once. */
function goneProcessAgents(): Promise<Partial<Record<Backend, AgentMetadata>>> {
  goneProcess ??= startGoneProcess();
  return goneProcess;
}

async function startGoneProcess(): Promise<Partial<Record<Backend, AgentMetadata>>> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--conditions=@kvreuse/source', 'test/process/gone-agents.ts'],
    { cwd: packageDir },
  );
  const printed = JSON.parse(stdout) as Record<Backend, { name: string; metadata: string }>;
  return Object.fromEntries(
    Object.entries(printed).map(([backend, { name, metadata }]) => [
      backend,
      { name, metadata: () => Buffer.from(metadata, 'base64') },
    ]),
  );
}

describe('loadSourcePeer', () => {
  it('loads the peer of a source rank whose metadata is signed for it', async () => {
    const reader = await createAgent();
    const source = await createAgent();
    const peer = await loadSourcePeer(reader, partOf(source), secret);
    expect(peer.info().state).toBe('ready');
    expect(reader.counters().livePeers).toBe(1);
  });

  it('loads the peers of every rank of a source, by rank part', async () => {
    const reader = await createAgent();
    const sources = [await createAgent(), await createAgent()];
    const parts = signedTestParts(testGeometry, 'source-0', sources, secret);
    const remotePeers = new RemotePeers(reader, () => undefined);
    const peers = await loadSourcePeers(reader, parts, secret, remotePeers);
    expect([...peers.keys()]).toEqual(parts);
    expect([...peers.values()].map((peer) => peer.info().state)).toEqual(['ready', 'ready']);
    expect(reader.counters().livePeers).toBe(2);
  });

  it('refuses a source rank whose agent is gone while discovery still lists it (source-unreachable)', async () => {
    const reader = await createAgent();
    const source = await createAgent();
    const part = partOf(source);
    await source.close();
    const refused = await refusalOf(reader, part);
    expect(refused).toBeInstanceOf(PullRefusedError);
    expect(refused).toEqual(refusal('source-unreachable', 'REMOTE_DISCONNECT', /is not alive/));
    expect(refused).toMatchObject({
      message: expect.stringContaining(
        'source-0 tp 0 pp 0: its agent cannot be reached (kvt_peer_load failed with REMOTE_DISCONNECT',
      ),
    });
    expect(reader.counters().livePeers).toBe(0);
  });

  it('refuses metadata the source signed malformed (metadata-refused, INVALID_PARAM)', async () => {
    const reader = await createAgent();
    const source = await createAgent();
    const corrupted = source.metadata();
    corrupted[corrupted.length - 1] = (corrupted[corrupted.length - 1] ?? 0) ^ 0xff;
    const refused = await refusalOf(reader, partOf({ name: source.name, metadata: () => corrupted }));
    expect(refused).toEqual(refusal('metadata-refused', 'INVALID_PARAM', /checksum mismatch/));
    expect(refused).toMatchObject({ message: expect.stringContaining('its transport metadata cannot be loaded here') });
    expect(reader.counters().livePeers).toBe(0);
  });

  it('throws what is this agent’s own failure as it is: a closed reader agent', async () => {
    const reader = await createAgent();
    const source = await createAgent();
    await reader.close();
    await expect(loadSourcePeer(reader, partOf(source), secret)).rejects.toThrow(HandleClosedError);
  });

  it('refuses a loopback agent of another process (source-unreachable, NOT_SUPPORTED)', async () => {
    const { loopback } = await goneProcessAgents();
    const reader = await createAgent();
    expect(await refusalOf(reader, partOf(loopback!))).toEqual(
      refusal('source-unreachable', 'NOT_SUPPORTED', /lives in process \d+, not this one/),
    );
    expect(reader.counters().livePeers).toBe(0);
  });

  describe.skipIf(!ucxTestsRun)('with ucx', () => {
    it('refuses the metadata of a source on another backend (metadata-refused, MISMATCH)', async () => {
      const reader = await createAgent('loopback');
      const source = await createAgent('ucx');
      const refused = await refusalOf(reader, partOf(source));
      expect(refused).toEqual(
        refusal('metadata-refused', 'MISMATCH', /is for the ucx backend; agent .* uses loopback/),
      );
      expect(reader.counters().livePeers).toBe(0);
    });

    it('refuses the ucx agent of a process that is gone (source-unreachable, REMOTE_DISCONNECT)', async () => {
      const { ucx } = await goneProcessAgents();
      const reader = await createAgent('ucx');
      expect(await refusalOf(reader, partOf(ucx!))).toEqual(
        refusal('source-unreachable', 'REMOTE_DISCONNECT', /the process \(pid \d+\) of peer .* is gone/),
      );
      expect(reader.counters().livePeers).toBe(0);
    });
  });
});
