// Writes benchmark figures into bench/parts/registry.json at the repository root, keeping the
// figures other registry benchmarks wrote there: each benchmark script calls `recordFigures`.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Figure {
  readonly value: number;
  readonly unit: string;
  readonly anchor?: number;
  readonly ratio?: number;
  readonly goal?: string;
  readonly note?: string;
}

export const registryPartPath = join(dirname(fileURLToPath(import.meta.url)), '../../../bench/parts/registry.json');

export function recordFigures(figures: Record<string, Figure>): void {
  const previous = existsSync(registryPartPath)
    ? (JSON.parse(readFileSync(registryPartPath, 'utf8')) as { figures?: Record<string, Figure> }).figures
    : undefined;
  mkdirSync(dirname(registryPartPath), { recursive: true });
  writeFileSync(registryPartPath, `${JSON.stringify({ figures: { ...previous, ...figures } }, null, 2)}\n`);
}
