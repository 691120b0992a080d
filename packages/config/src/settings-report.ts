import { formatValue, settingDescriptions } from './descriptions.js';
import { describeProvenance, type Provenance } from './errors.js';
import type { ResolvedSettings } from './resolve.js';

/**
 * Every resolved setting on one line, with where its value came from, e.g.
 * `router.minimum_transfer_prefix_blocks  8  argv --router-minimum-transfer-prefix-blocks`.
 */
export function renderSettingsReport({ settings, provenance }: ResolvedSettings): string {
  const rows = settingDescriptions.map((setting) => {
    const value = (settings[setting.group] as Readonly<Record<string, unknown>>)[setting.name];
    const from = (provenance[setting.group] as Readonly<Record<string, Provenance>>)[setting.name];
    return [setting.fileKey, formatValue(value), from === undefined ? '' : describeProvenance(from)] as const;
  });
  const keyWidth = Math.max(...rows.map(([key]) => key.length));
  const valueWidth = Math.max(...rows.map(([, value]) => value.length));
  return `${rows.map(([key, value, from]) => `${key.padEnd(keyWidth)}  ${value.padEnd(valueWidth)}  ${from}`.trimEnd()).join('\n')}\n`;
}
