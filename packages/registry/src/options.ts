// Shape checks of the options that registry functions and constructors take. Each refuses with
// `InvalidRegistryOptionError` naming the option (`agent`, `signal`, `options.timeoutMs`, …).
import { InvalidRegistryOptionError } from './errors.js';

/** Refuses anything but an object (`null`, a number, a string, …) where an options object is expected. */
export function checkOptionsObject<T>(option: string, value: T): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidRegistryOptionError(option, value, 'must be an options object');
  }
  return value;
}

export function checkFunction(option: string, value: unknown): void {
  if (typeof value !== 'function') throw new InvalidRegistryOptionError(option, value, 'must be a function');
}

export function checkNonEmptyString(option: string, value: unknown): void {
  if (typeof value !== 'string' || value === '') throw new InvalidRegistryOptionError(option, value, 'must be a non-empty string');
}

/** An optional `AbortSignal`. */
export function checkSignal(option: string, value: unknown): void {
  if (value !== undefined && !(value instanceof AbortSignal)) throw new InvalidRegistryOptionError(option, value, 'must be an AbortSignal');
}

/** An optional duration: a positive, finite number of milliseconds. */
export function checkDurationMs(option: string, value: unknown): void {
  if (value !== undefined && !(typeof value === 'number' && Number.isFinite(value) && value > 0)) {
    throw new InvalidRegistryOptionError(option, value, 'must be a positive number of milliseconds');
  }
}

/** An array whose every element passes `check` (given its index). */
export function checkArray(option: string, value: unknown, check: (element: unknown, option: string) => void): void {
  if (!Array.isArray(value)) throw new InvalidRegistryOptionError(option, value, 'must be an array');
  value.forEach((element: unknown, index) => check(element, `${option}[${index}]`));
}

const storeMethods = ['grantLease', 'keepAlive', 'revokeLease', 'put', 'get', 'list', 'delete', 'commit', 'compact', 'watch', 'close'] as const;

/** A `DiscoveryStore`: an object with every method of the interface. */
export function checkStore(option: string, store: unknown): void {
  const methods = checkOptionsObject(option, store) as Record<string, unknown>;
  for (const method of storeMethods) {
    if (typeof methods[method] !== 'function') throw new InvalidRegistryOptionError(option, store, `must be a DiscoveryStore (no ${method}() method)`);
  }
}

/** An optional string (a key prefix, say). */
export function checkOptionalString(option: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'string') throw new InvalidRegistryOptionError(option, value, 'must be a string');
}
