// The shape checks of the options that inventory functions and constructors take. Each refuses with
// `InvalidInventoryOptionError` naming the option.
import { optionChecks } from '@kvreuse/discovery';
import { InvalidInventoryOptionError } from './errors.js';

export const { checkFunction, checkNonEmptyString, checkOptionalString, checkOptionsObject, checkStore } = optionChecks(
  (option, value, rule) => new InvalidInventoryOptionError(option, value, rule),
);
