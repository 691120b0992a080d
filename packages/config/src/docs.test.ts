import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { crossFieldRules } from './catalog.js';
import { settingDescriptions } from './descriptions.js';
import { DOCS_COMMAND, renderConfigDocs } from './docs.js';
import { settingsJsonSchema } from './json-schema.js';

const committedDocs = new URL('../../../docs/config.md', import.meta.url);
const committedSchema = new URL('../schema/settings.schema.json', import.meta.url);

describe('renderConfigDocs', () => {
  const docs = renderConfigDocs();

  it('documents every setting with its key, type, default, unit, flag and variable, and every rule', () => {
    for (const setting of settingDescriptions) {
      expect(docs).toContain(`### \`${setting.fileKey}\``);
      expect(docs).toContain(`\`${setting.env}\``);
      expect(docs).toContain(`\`${setting.flag}`);
      expect(docs).toContain(setting.description);
      if (setting.unit !== undefined) expect(docs).toContain(`- unit: ${setting.unit}`);
    }
    for (const { rule, why } of crossFieldRules) expect(docs).toContain(`- \`${rule}\`: ${why}`);
  });

  it('matches the committed docs/config.md', () => {
    const committed = readFileSync(committedDocs, 'utf8');
    expect(committed === docs, `docs/config.md is stale: run \`${DOCS_COMMAND}\` and commit the result`).toBe(true);
  });

  it('matches the committed schema/settings.schema.json', () => {
    const committed = readFileSync(committedSchema, 'utf8');
    const generated = `${JSON.stringify(settingsJsonSchema, null, 2)}\n`;
    expect(committed === generated, `schema/settings.schema.json is stale: run \`${DOCS_COMMAND}\` and commit the result`).toBe(true);
  });
});
