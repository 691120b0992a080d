// The shape checks of the options that registry functions and constructors take. Each refuses with
// `InvalidRegistryOptionError` naming the option.
import { optionChecks } from '@kvreuse/discovery';
import { InvalidRegistryOptionError } from './errors.js';

export const {
  checkArray,
  checkDurationMs,
  checkFunction,
  checkNonEmptyString,
  checkOptionalString,
  checkOptionsObject,
  checkSignal,
  checkStore,
} = optionChecks((option, value, rule) => new InvalidRegistryOptionError(option, value, rule));
