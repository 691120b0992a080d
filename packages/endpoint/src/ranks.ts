// Ranks as the endpoint's sides compare them: by tensor- and pipeline-parallel rank.
import type { RankId, RankPart } from '@kvreuse/descriptors';

export const sameRank = (a: RankId, b: RankId): boolean => a.tpRank === b.tpRank && a.ppRank === b.ppRank;

/** The rank a published rank part is of. */
export const rankOf = (part: RankPart): RankId => ({ tpRank: part.parallel.tpRank, ppRank: part.parallel.ppRank });
