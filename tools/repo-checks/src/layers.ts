// The layers of docs/architecture.md, lowest first. A package may import only packages that stand before it here.
export const layerOrder = [
  'errors',
  'config',
  'descriptors',
  'discovery',
  'inventory',
  'engine-events',
  'native-bindings',
  'registry',
  'drain',
  'profile-admission',
  'router',
  'endpoint',
  'cli',
] as const;

export type LayerName = (typeof layerOrder)[number];

export function layerIndex(name: string): number {
  return (layerOrder as readonly string[]).indexOf(name);
}
