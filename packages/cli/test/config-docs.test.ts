import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  DOCS_COMMAND,
  docsPath,
  renderRepositoryDocs,
  renderRepositorySchema,
  schemaPath,
} from '../scripts/config-docs.js';

describe('the generated docs/config.md and settings schema', () => {
  it('match the committed docs/config.md', () => {
    const committed = readFileSync(docsPath, 'utf8');
    expect(
      committed === renderRepositoryDocs(),
      `docs/config.md is stale: run \`${DOCS_COMMAND}\` and commit the result`,
    ).toBe(true);
  });

  it('match the committed schema/settings.schema.json', () => {
    const committed = readFileSync(schemaPath, 'utf8');
    expect(
      committed === renderRepositorySchema(),
      `schema/settings.schema.json is stale: run \`${DOCS_COMMAND}\` and commit the result`,
    ).toBe(true);
  });
});
