import { DemoTransferError } from '../errors.js';
import { writeBlockContent } from './kv-content.js';
/** The registered rank's regions by bank number. */
export const regionsOf = (registered) => registered.banks.map((bank) => bank.region);
export async function handOff(options) {
    const { rank, template, decode, hashes } = options;
    if (options.destinationSlots.length !== hashes.length) {
        throw new DemoTransferError('hand-off', `names ${options.destinationSlots.length} destination slots for ${hashes.length} blocks`);
    }
    // The prefill computes block i into its own slot i.
    hashes.forEach((hash, slot) => writeBlockContent(rank.part, rank.views, slot, hash));
    const { registered } = rank.endpoint.readyRank;
    const sourceBlocks = Uint32Array.from(hashes, (_, slot) => slot);
    const destinationBlocks = Uint32Array.from(options.destinationSlots);
    const prepared = template.pairs.map((_, pair) => {
        const decodeRank = template.pairDestinationRank[pair];
        const { peer, ticket, regionIds } = rank.peerOf(decode, decode.ranks[decodeRank]);
        const write = rank.agent.registerTemplate({ peer, template, pair, direction: 'write', localRegions: regionsOf(registered), remoteRegions: regionIds });
        return { write, ticket };
    });
    const started = performance.now();
    let bytes = 0;
    try {
        // One post per block and rank pair, a block at a time: the first transfer to a freshly loaded peer
        // touches each page of its mapping for the first time (slow on virtual machines; see the native
        // README's "first touch"), and a whole prompt in one post would outlive transport.operation_timeout_ms.
        for (let block = 0; block < hashes.length; block++) {
            const posts = prepared.map(({ write, ticket }) => rank.endpoint.ledger.postBlocks({ template: write, sourceBlocks: sourceBlocks.subarray(block, block + 1), destinationBlocks: destinationBlocks.subarray(block, block + 1) }, { ticket, banks: registered.banks }));
            const outcomes = await Promise.all(posts.map((operation) => operation.outcome));
            await Promise.all(posts.map((operation) => operation.quiescence));
            for (const outcome of outcomes) {
                if (!outcome.ok)
                    throw new DemoTransferError('hand-off', `WRITE of block ${block} failed: ${outcome.error.message}`);
                bytes += outcome.bytesDone;
            }
        }
    }
    finally {
        for (const { write } of prepared)
            write.release();
    }
    const ms = performance.now() - started;
    return { blocks: hashes.length, bytes, ms };
}
