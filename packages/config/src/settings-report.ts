import { formatValue } from './descriptions.js';
import { ConfigArgumentError, describeProvenance, isRecord, type Provenance } from './errors.js';
import { snakeCase } from './names.js';
import { printable } from '@kvreuse/errors';
import type { IgnoredSetting } from './sources.js';

/** A resolution of any composition, as `resolve` returns it. */
export interface ResolutionToReport {
  readonly settings: object;
  readonly provenance: object;
  readonly ignored: readonly IgnoredSetting[];
}

/**
 * Every resolved setting on one line, with where its value came from, e.g.
 * `router.minimum_transfer_prefix_blocks  8  argv --router-minimum-transfer-prefix-blocks`; then every
 * ignored setting of a group not composed, e.g. `ignored  transport.backend  file kvreuse.yaml:4 (group transport)`.
 * Control characters in names and values are escaped (`\u001b`), so that every entry stays one line of text.
 */
export function renderSettingsReport(resolved: ResolutionToReport): string {
  const refuse = (argument: string, value: unknown, rule: string): never => {
    throw new ConfigArgumentError('renderSettingsReport', argument, value, rule);
  };
  if (!isRecord(resolved)) refuse('resolved', resolved, 'a resolution: { settings, provenance, ignored }');
  const { settings, provenance, ignored } = resolved;
  if (!isRecord(settings)) refuse('resolved.settings', settings, 'the resolved settings, an object');
  if (!isRecord(provenance)) refuse('resolved.provenance', provenance, 'the provenance of every setting, an object');
  if (!Array.isArray(ignored)) refuse('resolved.ignored', ignored, 'the ignored settings, an array');
  const rows = Object.entries(settings as Readonly<Record<string, Readonly<Record<string, unknown>>>>).flatMap(
    ([group, values]) =>
      Object.entries(values).map(([name, value]) => {
        const from = (provenance as Readonly<Record<string, Readonly<Record<string, Provenance>>>>)[group]?.[name];
        const key = `${group}.${snakeCase(name)}`;
        const source = from === undefined ? '' : describeProvenance(from);
        return [printable(key), formatValue(value), printable(source)] as const;
      }),
  );
  const keyWidth = Math.max(0, ...rows.map(([key]) => key.length));
  const valueWidth = Math.max(0, ...rows.map(([, value]) => value.length));
  const lines = rows.map(([key, value, from]) =>
    `${key.padEnd(keyWidth)}  ${value.padEnd(valueWidth)}  ${from}`.trimEnd(),
  );
  const ignoredLines = ignored.map(({ name, source, group }) =>
    printable(`ignored  ${name}  ${describeProvenance(source)} (group ${group} not composed)`),
  );
  return `${[...lines, ...ignoredLines].join('\n')}\n`;
}
