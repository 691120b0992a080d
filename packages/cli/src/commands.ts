import { benchLink } from './bench-link-command.js';
import { bench } from './checkout-commands.js';
import type { Command } from './command.js';
import { configSchema, configShow, configValidate } from './config-commands.js';
import { demo } from './demo-command.js';
import { inspect } from './inspect-command.js';
import { profilesCheck, profilesList, profilesShow } from './profiles-commands.js';
import { sidecar } from './sidecar-command.js';
import { watch } from './watch-command.js';

/** Every command of the binary, in the order `kvreuse --help` lists them. */
export const commands: readonly Command[] = [
  configShow,
  configValidate,
  configSchema,
  profilesList,
  profilesShow,
  profilesCheck,
  inspect,
  watch,
  sidecar,
  bench,
  benchLink,
  demo,
];
