/** A rank of a worker, named by its tensor- and pipeline-parallel ranks. */
export interface RankId {
  readonly tpRank: number;
  readonly ppRank: number;
}

export function formatRank(rank: RankId): string {
  return `tp ${rank.tpRank}, pp ${rank.ppRank}`;
}
