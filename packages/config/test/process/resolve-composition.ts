// A process that composes the groups named on its command line and resolves them from a settings file
// and its own environment: `resolve-composition.ts <group,group> <error|ignore> <settings file>`.
// It prints one JSON line, `{ event: 'resolved', … }` or `{ event: 'refused', … }` (exit code 2).
import { defineSettings, isSettingsError, type ForeignGroupsPolicy } from '@kvreuse/config';
import { allSampleGroups } from '../sample-groups.js';

const [groupNames = '', foreignGroups = 'error', file = ''] = process.argv.slice(2);
const groups = groupNames.split(',').map((name) => {
  const group = allSampleGroups.find((candidate) => candidate.name === name);
  if (group === undefined) throw new Error(`no group ${name}`);
  return group;
});
const settings = defineSettings(groups, { foreignGroups: foreignGroups as ForeignGroupsPolicy });
try {
  const { settings: values, provenance, ignored } = settings.resolve({ file, env: process.env });
  console.log(JSON.stringify({ event: 'resolved', pid: process.pid, settings: values, provenance, ignored }));
} catch (error) {
  if (!isSettingsError(error)) throw error;
  console.log(
    JSON.stringify({
      event: 'refused',
      pid: process.pid,
      code: error.code,
      unknown: 'unknown' in error ? error.unknown : [],
      message: error.message,
    }),
  );
  process.exitCode = 2;
}
