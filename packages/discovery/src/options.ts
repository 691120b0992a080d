// The shape checks of the options that discovery functions and constructors take. Each refuses with
// `InvalidDiscoveryOptionError` naming the option.
import { optionChecks } from './option-checks.js';
import { InvalidDiscoveryOptionError } from './errors.js';

export const { checkArray, checkFunction, checkNonEmptyString, checkOptionalString, checkOptionsObject, checkStore } =
  optionChecks((option, value, rule) => new InvalidDiscoveryOptionError(option, value, rule));
