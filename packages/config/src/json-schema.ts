import type { Composition } from './composition.js';
import { deepFrozen } from './descriptions.js';
import { GROUP_NAME } from './group.js';

/**
 * The JSON Schema (draft 2020-12) of a settings file for one composition: every composed group section
 * and key, each value's type, bounds, default and description. Under `foreignGroups: 'ignore'` other
 * group sections are allowed (and not checked). Editors use it for completion and checking.
 */
export function settingsFileJsonSchema(composition: Composition): Readonly<Record<string, unknown>> {
  const groups = Object.fromEntries(
    composition.groups.map((group) => [
      group.name,
      {
        type: ['object', 'null'],
        description: group.description,
        additionalProperties: false,
        properties: Object.fromEntries(
          group.settings.map((setting) => [
            setting.key,
            {
              ...setting.jsonSchema,
              description:
                setting.unit === undefined ? setting.description : `${setting.description} (${setting.unit})`,
              default: setting.default,
            },
          ]),
        ),
      },
    ]),
  );
  const foreign =
    composition.foreignGroups === 'ignore'
      ? {
          patternProperties: {
            [GROUP_NAME.source]: { description: 'A group this process does not compose: ignored, and reported.' },
          },
        }
      : {};
  return deepFrozen({
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'kvreuse settings file',
    description:
      'Group sections with snake_case keys. Rules between settings (see the settings docs) are checked by resolution only.',
    type: ['object', 'null'],
    additionalProperties: false,
    properties: groups,
    ...foreign,
  });
}
