// The prebuilt native library loads on the glibc the docs promise (docs/troubleshooting.md: "glibc (2.34
// or later)"): none of the symbols it imports may carry a newer GLIBC_ version. A build on a newer glibc
// can bind a plain call to a newer symbol (strtoull to __isoc23_strtoull@GLIBC_2.38 under _GNU_SOURCE).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The libraries a checkout builds: the one `make -C native` builds, and each platform package's copy. */
export const nativeLibraries = [
  'native/build/libkvreuse_transport.so',
  'packages/native-linux-x64-gnu/libkvreuse_transport.so',
  'packages/native-linux-arm64-gnu/libkvreuse_transport.so',
];

/** The floor the docs state. */
export function documentedGlibcFloor(repoRoot: string): string {
  const text = readFileSync(join(repoRoot, 'docs/troubleshooting.md'), 'utf8');
  const floor = /glibc \((\d+\.\d+) or later\)/.exec(text)?.[1];
  if (floor === undefined) throw new Error('docs/troubleshooting.md states no glibc floor ("glibc (2.xx or later)")');
  return floor;
}

const newer = (version: string, floor: string): boolean => {
  const [major, minor] = version.split('.').map(Number) as [number, number];
  const [floorMajor, floorMinor] = floor.split('.').map(Number) as [number, number];
  return major > floorMajor || (major === floorMajor && minor > floorMinor);
};

/** Each imported symbol of `objdump -T` output whose GLIBC_ version is above `floor`: `__isoc23_strtoull@GLIBC_2.38`. */
export function symbolsAboveFloor(dynamicSymbols: string, floor: string): string[] {
  const above: string[] = [];
  for (const line of dynamicSymbols.split('\n')) {
    const match = /\s\(?GLIBC_(\d+\.\d+(?:\.\d+)?)\)?\s+(\S+)\s*$/.exec(line);
    if (match === null || !line.includes('*UND*')) continue;
    const [, version, symbol] = match as unknown as [string, string, string];
    if (newer(version, floor)) above.push(`${symbol}@GLIBC_${version}`);
  }
  return above;
}

/** Every built library's symbols above the documented floor, as `path: symbol@GLIBC_x.y`. */
export function checkGlibcFloor(repoRoot: string): { checked: string[]; problems: string[] } {
  const floor = documentedGlibcFloor(repoRoot);
  const checked = nativeLibraries.filter((library) => existsSync(join(repoRoot, library)));
  const problems = checked.flatMap((library) =>
    symbolsAboveFloor(execFileSync('objdump', ['-T', join(repoRoot, library)], { encoding: 'utf8' }), floor).map(
      (symbol) => `${library}: ${symbol} is newer than the documented floor glibc ${floor}`,
    ),
  );
  return { checked, problems };
}
