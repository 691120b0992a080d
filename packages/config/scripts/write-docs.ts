// Writes docs/config.md and schema/settings.schema.json from the catalog: `pnpm --filter @kvreuse/config docs`.
import { writeFileSync } from 'node:fs';
import { renderConfigDocs, settingsJsonSchema } from '../src/index.js';

const docsPath = new URL('../../../docs/config.md', import.meta.url);
const schemaPath = new URL('../schema/settings.schema.json', import.meta.url);
writeFileSync(docsPath, renderConfigDocs());
writeFileSync(schemaPath, `${JSON.stringify(settingsJsonSchema, null, 2)}\n`);
console.log(`wrote ${docsPath.pathname} and ${schemaPath.pathname}`);
