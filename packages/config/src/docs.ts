import { crossFieldRules } from './catalog.js';
import { COERCION_RULES } from './coerce.js';
import { formatValue, settingGroups, type SettingDescription } from './descriptions.js';

/** The command that regenerates docs/config.md; stale-docs failures quote it. */
export const DOCS_COMMAND = 'pnpm --filter @kvreuse/config docs';

function code(text: string): string {
  return `\`${text}\``;
}

function settingSection(setting: SettingDescription): string {
  const facts = [
    `- type: ${setting.type}`,
    `- default: ${code(formatValue(setting.default))}`,
    ...(setting.unit === undefined ? [] : [`- unit: ${setting.unit}`]),
    `- flag: ${setting.jsonSchema['type'] === 'boolean' ? `${code(setting.flag)}, ${code(`--no-${setting.flag.slice(2)}`)}` : code(`${setting.flag} <value>`)}`,
    `- env: ${code(setting.env)}`,
  ];
  return [`### ${code(setting.fileKey)}`, '', setting.description, '', ...facts].join('\n');
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|');
}

function summaryTable(): string {
  const rows = settingGroups.flatMap((group) =>
    group.settings.map(
      (setting) =>
        `| ${code(setting.fileKey)} | ${cell(setting.type)} | ${code(formatValue(setting.default))} | ${setting.unit ?? ''} |`,
    ),
  );
  return ['| setting | type | default | unit |', '|---|---|---|---|', ...rows].join('\n');
}

/** docs/config.md, generated from the catalog: every setting with its names, type, default, unit and rules. */
export function renderConfigDocs(): string {
  const groups = settingGroups.map((group) =>
    [`## ${code(group.name)}`, '', group.description, '', group.settings.map(settingSection).join('\n\n')].join('\n'),
  );
  const rules = crossFieldRules.map(({ rule, why }) => `- ${code(rule)}: ${why}`);
  return `# Settings

<!-- Generated from packages/config/src/catalog.ts by \`${DOCS_COMMAND}\`; do not edit by hand. -->

Every kvreuse setting is declared once, in the catalog of \`@kvreuse/config\`: its name, group, type,
default, unit and description. Its settings-file key, flag, environment variable, validation, help
text, JSON Schema and this page all come from that one declaration.

## Where values come from

\`resolveSettings({ file, env, argv })\` merges four sources; a later one wins:

1. the **default** below;
2. the **settings file**: YAML or JSON, a mapping of group sections with snake_case keys;
3. the **environment**: \`KVREUSE_<GROUP>_<NAME>\`, only from the \`env\` the caller passes (the library
   never reads \`process.env\` itself);
4. **argv**: \`--<group>-<name> <value>\` or \`--<group>-<name>=<value>\`; a boolean flag alone means
   \`true\`, \`--no-<group>-<name>\` means \`false\`, and a boolean never takes the next argument.

The result is grouped and camelCase (\`settings.router.minimumTransferPrefixBlocks\`), and its
\`provenance\` says where each value came from: \`default\`, \`file\` (with the path), \`env\` (with the
variable) or \`argv\` (with the flag).

\`\`\`yaml
router:
  enable_decode_to_prefill_reuse: true
  minimum_transfer_prefix_blocks: 8
transport:
  backend: ucx
\`\`\`

Environment and argv values are strings, read by the setting's type:
${COERCION_RULES}.
Values in a settings file are typed already and are not converted: \`"8"\` is not a number there. A
section left empty (\`router:\` with nothing under it) and an empty file set nothing.

## What fails

Resolution is all or nothing:

- a name no setting has — a file key or section, a \`KVREUSE_*\` variable, a flag, or any argv
  argument that is not a setting flag or its value — fails with one \`UnknownSettingError\`
  (\`code: 'UNKNOWN_SETTING'\`) that lists every unknown name, its source and the closest known name;
- a value that breaks its type, from any source (even one a later source overrides), a flag given
  twice, a flag without its value, and a broken rule between settings fail with one
  \`InvalidSettingError\` (\`code: 'INVALID_SETTING'\`) that lists each setting, source, value and rule;
- a file that cannot be read, is not valid YAML or JSON, or is not a mapping of sections fails with
  \`SettingsFileError\` (\`code: 'SETTINGS_FILE'\`).

Unknown names are reported first; rules between settings are checked after merging, and only between
values that are valid on their own.

## Rules between settings

${rules.join('\n')}

## All settings

${summaryTable()}

${groups.join('\n\n')}
`;
}
