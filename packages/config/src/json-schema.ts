import { settingGroups } from './descriptions.js';
import { snakeCase } from './names.js';

function buildSettingsJsonSchema(): Readonly<Record<string, unknown>> {
  const groups = Object.fromEntries(
    settingGroups.map((group) => [
      snakeCase(group.name),
      {
        type: ['object', 'null'],
        description: group.description,
        additionalProperties: false,
        properties: Object.fromEntries(
          group.settings.map((setting) => [
            setting.key,
            {
              ...setting.jsonSchema,
              description: setting.unit === undefined ? setting.description : `${setting.description} (${setting.unit})`,
              default: setting.default,
            },
          ]),
        ),
      },
    ]),
  );
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'kvreuse settings file',
    description:
      'Group sections with snake_case keys. Rules between settings (see docs/config.md) are checked by resolveSettings only.',
    type: ['object', 'null'],
    additionalProperties: false,
    properties: groups,
  };
}

/**
 * The JSON Schema (draft 2020-12) of a settings file, from the catalog: every group section and key,
 * each value's type, bounds, default and description. Editors use it for completion and checking.
 */
export const settingsJsonSchema: Readonly<Record<string, unknown>> = buildSettingsJsonSchema();
