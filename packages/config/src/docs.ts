import { COERCION_RULES } from './coerce.js';
import type { Composition } from './composition.js';
import { formatValue, type SettingDescription } from './descriptions.js';
import { ConfigArgumentError } from './errors.js';
import { checkedOptions } from './function-options.js';

export interface DocsOptions {
  /** Markdown placed right under the title, e.g. a note that the page is generated. */
  readonly preface?: string;
}

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

function summaryTable(composition: Composition): string {
  const rows = composition.settings.map(
    (setting) =>
      `| ${code(setting.fileKey)} | ${cell(setting.type)} | ${code(formatValue(setting.default))} | ${setting.unit ?? ''} |`,
  );
  return ['| setting | type | default | unit |', '|---|---|---|---|', ...rows].join('\n');
}

function foreignGroupsSection(composition: Composition): string {
  const shape = `A setting of a group this composition does not hold, known by its shape — a file section
\`<group>:\`, a variable \`KVREUSE_<GROUP>_…\`, a flag \`--<group>-…\` or \`--no-<group>-…\` —`;
  return composition.foreignGroups === 'ignore'
    ? `${shape}
is ignored, and listed in the resolution's \`ignored\` (the name as written, its source and
its group), so that this process can share one settings file and one environment with processes that
compose other or newer groups. A name inside a composed group that no setting has is still an error.`
    : `${shape}
is refused like any unknown name (\`foreignGroups: 'error'\`, the default). A process that shares
its settings file and environment with processes that compose other groups resolves with
\`foreignGroups: 'ignore'\`.`;
}

/** A settings reference for one composition: every setting with its names, type, default, unit and rules. */
export function renderDocs(composition: Composition, options?: DocsOptions): string {
  const { preface = '' } = checkedOptions('renderDocs', options, ['preface']);
  if (typeof preface !== 'string')
    throw new ConfigArgumentError('renderDocs', 'options.preface', preface, 'Markdown, a string');
  const groups = composition.groups.map((group) =>
    [`## ${code(group.name)}`, '', group.description, '', group.settings.map(settingSection).join('\n\n')].join('\n'),
  );
  const rules = composition.rules.map(({ description: { rule, why } }) => `- ${code(rule)}: ${why}`);
  return `# Settings

${preface === '' ? '' : `${preface}\n\n`}Groups: ${composition.groups.map((group) => code(group.name)).join(', ')}.

Each group is declared once, by the layer that owns it (\`defineGroup\` of \`@kvreuse/config\`): every
setting's name, type, default, unit and description. A process composes the groups it uses
(\`defineSettings(groups)\`), and the settings-file keys, flags, environment variables, validation, help
text, JSON Schema and this page all come from those declarations.

## Where values come from

\`resolve({ file, env, argv })\` merges four sources; a later one wins:

1. the **default** below;
2. the **settings file**: YAML or JSON, a mapping of group sections with snake_case keys;
3. the **environment**: \`KVREUSE_<GROUP>_<NAME>\`, only from the \`env\` the caller passes (the library
   never reads \`process.env\` itself);
4. **argv**: \`--<group>-<name> <value>\` or \`--<group>-<name>=<value>\`; a boolean flag alone means
   \`true\`, \`--no-<group>-<name>\` means \`false\`, and a boolean never takes the next argument.

The result is grouped and camelCase (\`settings.router.minimumTransferPrefixBlocks\`), and its
\`provenance\` says where each value came from: \`default\`, \`file\` (with the path, and the line of
the key when the file was read from text), \`env\` (with the variable) or \`argv\` (with the flag).

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

## Settings of other groups

${foreignGroupsSection(composition)}

## What fails

Resolution is all or nothing, and every error names a setting the way it was written: the file key
with the file and line (\`router.minimum_transfer_prefix_blocks in file kvreuse.yaml:3\`), the variable,
or the flag.

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

${rules.length === 0 ? 'None.' : rules.join('\n')}

## All settings

${summaryTable(composition)}

${groups.join('\n\n')}
`;
}
