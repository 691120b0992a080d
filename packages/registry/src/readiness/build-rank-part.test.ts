// buildRankPart and transportMetadataOf refuse arguments of the wrong shape, naming the argument.
import { ClusterSecret } from '@kvreuse/discovery';
import { describe, expect, it } from 'vitest';
import { buildRankPart } from './build-rank-part.js';
import { transportMetadataOf } from './transport-metadata.js';

const option = (name: string) => expect.objectContaining({ code: 'INVALID_REGISTRY_OPTION', option: name });

describe('building a rank part refuses arguments of the wrong shape, naming the argument', () => {
  it('buildRankPart and transportMetadataOf', () => {
    const transport = { agentName: 'a', generation: 1, metadata: new Uint8Array(4) };
    const rank = { tpRank: 0, ppRank: 0, agent: { name: 'a', register: () => undefined as never }, banks: [] };
    expect(() => buildRankPart(undefined as never, rank, transport)).toThrow(option('worker'));
    expect(() => buildRankPart({} as never, { ...rank, banks: undefined } as never, transport)).toThrow(
      option('rank.banks'),
    );
    expect(() => buildRankPart({} as never, rank, { ...transport, metadata: 'blob' } as never)).toThrow(
      expect.objectContaining({ code: 'RANK_PART_PUBLICATION_REFUSED', field: 'transport.metadata' }),
    );
    expect(() => buildRankPart({} as never, rank, transport, null as never)).toThrow(option('options'));
    expect(() => buildRankPart({} as never, rank, transport, { host: '' })).toThrow(
      expect.objectContaining({ code: 'RANK_PART_PUBLICATION_REFUSED', field: 'options.host' }),
    );
    expect(() =>
      transportMetadataOf({ name: 'a' } as never, ClusterSecret.ofThisProcess(), {
        workerId: 'w',
        incarnation: 'i',
        ...rank,
      }),
    ).toThrow(option('agent.metadata'));
  });
});
