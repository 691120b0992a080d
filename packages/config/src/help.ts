import { COERCION_RULES } from './coerce.js';
import type { Composition } from './composition.js';
import { formatValue, type SettingDescription } from './descriptions.js';
import { ConfigArgumentError } from './errors.js';
import { checkedOptions } from './function-options.js';

export interface HelpOptions {
  /** Columns to wrap at; 100 by default. */
  readonly width?: number;
}

function wrap(text: string, indent: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line !== '' && indent.length + line.length + 1 + word.length > width) {
      lines.push(indent + line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  if (line !== '') lines.push(indent + line);
  return lines;
}

function settingHelp(setting: SettingDescription, width: number): string[] {
  const isBoolean = setting.jsonSchema['type'] === 'boolean';
  const flags = isBoolean ? `${setting.flag}, --no-${setting.flag.slice(2)}` : `${setting.flag} <value>`;
  const unit = setting.unit === undefined ? '' : ` ${setting.unit}`;
  return [
    ...wrap(flags, '  ', width),
    ...wrap(setting.description, '      ', width),
    ...wrap(`${setting.type}${unit}; default ${formatValue(setting.default)}`, '      ', width),
    ...wrap(`env ${setting.env}, file ${setting.fileKey}`, '      ', width),
  ];
}

/** Help text for a CLI: every composed setting's flag, grouped, with its variable, file key, type and default. */
export function renderHelp(composition: Composition, options?: HelpOptions): string {
  const { width = 100 } = checkedOptions('renderHelp', options, ['width']);
  if (typeof width !== 'number' || !Number.isSafeInteger(width) || width < 1)
    throw new ConfigArgumentError('renderHelp', 'options.width', width, 'an integer ≥ 1');
  const sections = composition.groups.map((group) =>
    [
      `${group.name}:`,
      ...wrap(group.description, '  ', width),
      '',
      ...group.settings.flatMap((setting) => [...settingHelp(setting, width), '']),
    ].join('\n'),
  );
  const intro = wrap(
    `Settings come from defaults < settings file < KVREUSE_* environment < flags. Flags take --flag value or --flag=value; env and flag values: ${COERCION_RULES}.`,
    '',
    width,
  );
  return `${[...intro, '', ...sections].join('\n').trimEnd()}\n`;
}
