import { describe, expect, it } from 'vitest';
import { allSampleGroups, routerGroup } from '../test/sample-groups.js';
import { compose } from './composition.js';
import { describeValue } from '@kvreuse/errors';
import { renderHelp } from './help.js';

const every = compose(allSampleGroups, 'error');
const settingGroups = every.groups;
const settingDescriptions = every.settings;
const renderSettingsHelp = (options?: { width: number }) => renderHelp(every, options);

describe('renderSettingsHelp', () => {
  it('lists every group and every flag with its variable, file key and default', () => {
    const help = renderSettingsHelp();
    for (const group of settingGroups) expect(help).toContain(`\n${group.name}:\n`);
    for (const setting of settingDescriptions) {
      expect(help).toContain(`  ${setting.flag}`);
      expect(help).toContain(setting.env);
      expect(help).toContain(setting.fileKey);
    }
    expect(help).toContain('--router-enable-decode-to-prefill-reuse, --no-router-enable-decode-to-prefill-reuse');
    expect(help).toContain('--router-minimum-transfer-prefix-blocks <value>');
    expect(help).toContain('integer ≥ 1 blocks; default 4');
    expect(help).toContain('default http://127.0.0.1:2379');
  });

  it('lists the composed groups only', () => {
    const help = renderHelp(compose([routerGroup], 'ignore'));
    expect(help).toContain('--router-minimum-transfer-prefix-blocks <value>');
    expect(help).not.toContain('transport');
  });

  it('wraps at the width asked for, except for a single word longer than the width', () => {
    for (const width of [60, 100]) {
      const lines = renderSettingsHelp({ width }).split('\n');
      for (const line of lines) {
        if (line.trim().includes(' ')) expect(line.length, line).toBeLessThanOrEqual(width);
      }
    }
  });

  it('refuses options it does not take, and a width that is no integer ≥ 1, naming them', () => {
    const refused = (options: unknown, message: string) =>
      expect(() => renderHelp(every, options as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message }),
      );
    refused(null, 'renderHelp: options must be undefined or { width? }; got null');
    refused({ widht: 60 }, 'renderHelp: options.widht must be left out: the options are { width? }; got 60');
    for (const width of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '60'])
      refused({ width }, `renderHelp: options.width must be an integer ≥ 1; got ${describeValue(width)}`);
  });
});
