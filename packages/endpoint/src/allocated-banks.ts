// The banks `ReuseEndpoint.open` allocates for a rank when the caller adopts none: laid out from the worker's
// geometry and owned by kvreuse, which frees them when they are handed back.
import { layoutRankBanks } from '@kvreuse/descriptors';
import type { Allocation } from '@kvreuse/native-bindings';
import { Bank, kvreuseOwner } from '@kvreuse/registry';
import type { ReuseEndpointOptions } from './endpoint-options.js';
import { EndpointOptionError } from './errors.js';

/** The rank's banks laid out from its worker's geometry, allocated by its agent, their pages touched, adopted as kvreuse's. */
export async function allocateBanks(
  options: Pick<ReuseEndpointOptions, 'agent' | 'worker' | 'rank'> & { readonly blocks: number },
): Promise<{ banks: Bank[]; bankBytes: Uint8Array[] }> {
  const { agent, worker, rank, blocks } = options;
  if (!Number.isSafeInteger(blocks) || blocks < 1)
    throw new EndpointOptionError('blocks', blocks, 'a whole number of blocks per bank, at least 1');
  const layout = layoutRankBanks(
    worker.geometry,
    { ...rank, tpSize: worker.tpSize, ppSize: worker.ppSize },
    { address: 0n, blocks },
  );
  const allocations: Allocation[] = [];
  try {
    for (const bank of layout) allocations.push(await agent.allocate(bank.bytes));
  } catch (error) {
    for (const allocation of allocations) await allocation.free();
    throw error;
  }
  // A serving framework's KV cache is resident: touch every page now, not in the first transfer's time.
  const bankBytes = allocations.map((allocation) => allocation.view().fill(0));
  const banks = layout.map((bank, index) => {
    const allocation = allocations[index] as Allocation;
    return Bank.adopt(
      { ...bank, tpRank: rank.tpRank, ppRank: rank.ppRank, index, address: allocation.address },
      kvreuseOwner(allocation),
    );
  });
  return { banks, bankBytes };
}
