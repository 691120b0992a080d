// One source rank of the two-process pull test, as its own process: a ucx agent whose banks hold
// deterministic bytes, registered; it reports its metadata, region ids and the checksums of the
// pinned blocks for each rank pair it serves, then serves readers until killed.
import type { RankPart } from '@kvreuse/descriptors';
import { blockChecksums } from '../../src/block-checksum.js';
import { transport } from '../loopback-pull.js';
import { fillDeterministic } from '../workers.js';
import { PINNED_BLOCKS, ucxPull } from './ucx-pull.js';

const [name = 'ucx-source', rankArgument = '0'] = process.argv.slice(2);
const rank = Number(rankArgument);
const { sourceWorker, template } = ucxPull();
const agent = await transport.createAgent({ name, backend: 'ucx' });
const allocations = await Promise.all(
  (sourceWorker.ranks[rank] as RankPart).banks.map((bank) => agent.allocate(Number(bank.bytes))),
);
allocations.forEach((allocation, bank) => fillDeterministic(allocation.view(), rank, bank));
const regions = allocations.map((allocation) => agent.register(allocation));
const views = allocations.map((allocation) => allocation.view());
const checksums = Object.fromEntries(
  template.pairs.flatMap((_, pair) =>
    template.pairSourceRank[pair] === rank
      ? [[pair, Array.from(blockChecksums(template, pair, 'source', views, PINNED_BLOCKS))]]
      : [],
  ),
);
process.stdout.write(
  `${JSON.stringify({ event: 'ready', metadata: agent.metadata().toString('base64'), regionIds: regions.map((region) => region.id), checksums })}\n`,
);
setInterval(() => {}, 1 << 30);
