// The shapes the pin classes' options and arguments must have: a value of another shape is refused with
// EndpointOptionError naming it, before anything is kept or sent.
import { EndpointOptionError } from './errors.js';

/** `EndpointOptionError` naming `option` unless `value` is an object (not null). */
export function checkObject(option: string, value: unknown, rule: string): asserts value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) throw new EndpointOptionError(option, value, rule);
}

/** `EndpointOptionError` naming `option` unless `value` is an object with each of `methods` a function. */
export function checkMethods(option: string, value: unknown, methods: readonly string[], rule: string): void {
  checkObject(option, value, rule);
  if (methods.some((method) => typeof value[method] !== 'function')) throw new EndpointOptionError(option, value, rule);
}

/** `EndpointOptionError` naming `option` unless `value` is a function, or left out where `optional`. */
export function checkFunction(option: string, value: unknown, optional = false): void {
  if (optional && value === undefined) return;
  if (typeof value !== 'function') throw new EndpointOptionError(option, value, 'a function');
}
