// Discovery stores as the tests see them: one some of whose calls a test answers itself (to hold, fail or
// watch them), and what a store has published.
import type { DiscoveryStore, MemoryDiscoveryStore } from '@kvreuse/discovery';

/** `store`, its methods that `answers` names answered by those instead. */
export function storeWith(
  store: MemoryDiscoveryStore,
  answers: Partial<Pick<MemoryDiscoveryStore, 'grantLease' | 'revokeLease' | 'watch' | 'commit'>>,
): MemoryDiscoveryStore {
  return new Proxy(store, {
    get(target, key) {
      const answer: unknown = Reflect.get(answers, key);
      if (answer !== undefined) return answer;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** The keys in discovery but the workers' epoch bookkeeping, which outlives them: rank parts, inventory. */
export async function publishedKeys(store: DiscoveryStore): Promise<string[]> {
  return (await store.list('')).entries.map(({ key }) => key).filter((key) => !/\/epochs?(\/|$)/.test(key));
}
