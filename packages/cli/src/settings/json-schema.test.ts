import { loadSettingsFile } from '@kvreuse/config';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { routerFixtureJson, routerFixtureYaml } from '../../test/router-fixture.js';
import { kvreuseSettings, settingDescriptions } from './all-settings.js';
import { exampleSettingsPath } from './example.js';

const settingsJsonSchema = kvreuseSettings.jsonSchema;

const validate = new Ajv2020({ strict: true, allErrors: true }).compile(settingsJsonSchema);

describe('settingsJsonSchema', () => {
  it('accepts the bundled example file and the router fixture', () => {
    for (const data of [
      loadSettingsFile(exampleSettingsPath).data,
      loadSettingsFile({ text: routerFixtureYaml }).data,
      JSON.parse(routerFixtureJson),
      null,
      { router: null },
    ]) {
      expect(validate(data), JSON.stringify(validate.errors)).toBe(true);
    }
  });

  it('describes every setting with its type, default and description', () => {
    const groups = settingsJsonSchema['properties'] as Record<
      string,
      { properties: Record<string, Record<string, unknown>> }
    >;
    for (const setting of settingDescriptions) {
      const property = groups[setting.group]?.properties[setting.key];
      expect(property?.['default'], setting.fileKey).toEqual(setting.default);
      expect(property?.['description']).toContain(setting.description);
    }
  });

  it('rejects unknown sections and keys and values that break their rules', () => {
    for (const data of [
      { routr: {} },
      { router: { minimum_transfer_prefix_block: 4 } },
      { router: { minimum_transfer_prefix_blocks: 0 } },
      { transport: { backend: 'tcp' } },
      { discovery: { lease_ttl_ms: 1500 } },
      { discovery: { etcd_endpoints: ['etcd:2379'] } },
      { frontend: { reject_media_status_code: 200 } },
      ['router'],
    ]) {
      expect(validate(data), JSON.stringify(data)).toBe(false);
    }
  });
});
