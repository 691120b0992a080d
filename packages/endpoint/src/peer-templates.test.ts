import { referenceGeometries, type Worker } from '@kvreuse/descriptors';
import type { Agent, Peer, RegisteredTemplate } from '@kvreuse/native-bindings';
import type { RegisteredRank } from '@kvreuse/registry';
import { describe, expect, it } from 'vitest';
import { testWorker } from '../test/workers.js';
import { PeerTemplates } from './peer-templates.js';

const geometry = referenceGeometries['qwen3-0.6b'];
const source = testWorker(geometry, 1, 4, 'decode-0');
const destination = testWorker(geometry, 1, 4, 'prefill-0');

function restarted(worker: Worker, restart: number): Worker {
  const incarnation = `${worker.workerId}-${restart}`;
  return { ...worker, incarnation, ranks: worker.ranks.map((part) => ({ ...part, incarnation })) };
}

/** An agent that counts the templates it holds registered (registered and not released). */
function countingAgent(): { agent: Pick<Agent, 'registerTemplate'>; held: () => number } {
  let held = 0;
  const agent = {
    registerTemplate: (): RegisteredTemplate => {
      held += 1;
      let released = false;
      return {
        release: () => {
          if (!released) held -= 1;
          released = true;
        },
      } as unknown as RegisteredTemplate;
    },
  };
  return { agent, held: () => held };
}

function peerOf(worker: Worker): Peer {
  const regions = worker.ranks[0]!.banks.map((bank, id) => ({ id, address: BigInt(bank.address) }));
  return { generation: 1n, regions: () => regions } as unknown as Peer;
}

const local = { banks: [] } as unknown as RegisteredRank;

/** The write template from `source` to the remote's only rank, as a push asks for it. */
function pairTemplate(templates: PeerTemplates, remote: Worker) {
  return {
    template: templates.between(source, remote),
    pair: 0,
    direction: 'write' as const,
    remote: remote.ranks[0]!,
    peer: peerOf(remote),
    local,
    noRegion: (why: string) => new Error(why),
  };
}

describe('PeerTemplates', () => {
  it('builds a template once per pair of incarnations, and forgets it when either worker restarts', () => {
    const templates = new PeerTemplates(countingAgent().agent);
    const first = templates.between(source, destination);
    expect(templates.between(source, destination)).toBe(first);
    for (let restart = 1; restart <= 50; restart++) templates.between(source, restarted(destination, restart));
    expect(templates.between(source, destination)).not.toBe(first);
  });

  it('holds one registered template per remote worker, direction and pair, however often the remote restarts', () => {
    const { agent, held } = countingAgent();
    const templates = new PeerTemplates(agent);
    for (let restart = 1; restart <= 50; restart++)
      templates.release(templates.acquire(pairTemplate(templates, restarted(destination, restart))));
    expect(held()).toBe(1);
    templates.close();
    expect(held()).toBe(0);
  });

  it('keeps the registration of a superseded incarnation until the last transfer holding it gives it back', () => {
    const { agent, held } = countingAgent();
    const templates = new PeerTemplates(agent);
    const old = restarted(destination, 1);
    const first = templates.acquire(pairTemplate(templates, old));
    const second = templates.acquire(pairTemplate(templates, old));
    const current = templates.acquire(pairTemplate(templates, restarted(destination, 2)));
    expect(held()).toBe(2);
    templates.release(first);
    expect(held()).toBe(2);
    templates.release(second);
    expect(held()).toBe(1);
    templates.release(current);
    expect(held()).toBe(1);
    // Closed with a superseded registration still held: every one is released.
    templates.acquire(pairTemplate(templates, restarted(destination, 3)));
    templates.acquire(pairTemplate(templates, restarted(destination, 4)));
    expect(held()).toBe(2);
    templates.close();
    expect(held()).toBe(0);
  });
});
