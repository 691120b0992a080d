// Repository tooling, not part of the package's API: docs/config.md and schema/settings.schema.json
// are generated from every kvreuse group, and a test fails when the committed ones are stale.
import { kvreuseSettings } from '../src/settings/all-settings.js';

/** The command that regenerates docs/config.md and the schema; stale-docs failures quote it. */
export const DOCS_COMMAND = 'pnpm --filter @kvreuse/cli docs';

export const docsPath = new URL('../../../docs/config.md', import.meta.url);
export const schemaPath = new URL('../schema/settings.schema.json', import.meta.url);

/** docs/config.md: every kvreuse setting. */
export function renderRepositoryDocs(): string {
  return kvreuseSettings.renderDocs({
    preface: `<!-- Generated from the settings groups of every kvreuse package by \`${DOCS_COMMAND}\`; do not edit by hand. -->`,
  });
}

/** schema/settings.schema.json: a settings file holding any kvreuse setting. */
export function renderRepositorySchema(): string {
  return `${JSON.stringify(kvreuseSettings.jsonSchema, null, 2)}\n`;
}
