// Writes docs/config.md and schema/settings.schema.json from every kvreuse group: `pnpm --filter @kvreuse/cli docs`.
import { writeFileSync } from 'node:fs';
import { docsPath, renderRepositoryDocs, renderRepositorySchema, schemaPath } from './config-docs.js';

writeFileSync(docsPath, renderRepositoryDocs());
writeFileSync(schemaPath, renderRepositorySchema());
console.log(`wrote ${docsPath.pathname} and ${schemaPath.pathname}`);
