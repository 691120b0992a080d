// Shape checks of the options that functions and constructors take. Each package builds its own set
// with `optionChecks`, so that each refuses with that package's option error naming the option
// (`agent`, `signal`, `options.timeoutMs`, …).

/**
 * Makes the error a check throws: which option, the value as given and the rule it breaks.
 *
 * @internal
 */
export type OptionRefusal = (option: string, value: unknown, rule: string) => Error;

/**
 * The shape checks of one package, each refusing with that package's option error.
 *
 * @internal
 */
export interface OptionChecks {
  /** Refuses anything but an object (`null`, a number, a string, …) where an options object is expected. */
  checkOptionsObject<T>(option: string, value: T): T;
  checkFunction(option: string, value: unknown): void;
  checkNonEmptyString(option: string, value: unknown): void;
  /** An optional `AbortSignal`. */
  checkSignal(option: string, value: unknown): void;
  /** An optional duration: a positive, finite number of milliseconds. */
  checkDurationMs(option: string, value: unknown): void;
  /** An array whose every element passes `check` (given its index). */
  checkArray(option: string, value: unknown, check: (element: unknown, option: string) => void): void;
  /** A `DiscoveryStore`: an object with every method of the interface. */
  checkStore(option: string, store: unknown): void;
  /** An optional string (a key prefix, say). */
  checkOptionalString(option: string, value: unknown): void;
}

const storeMethods = [
  'grantLease',
  'keepAlive',
  'revokeLease',
  'put',
  'get',
  'list',
  'delete',
  'commit',
  'compact',
  'watch',
  'close',
] as const;

/**
 * The shape checks that refuse with `refuse(option, value, rule)`.
 *
 * @internal
 */
export function optionChecks(refuse: OptionRefusal): OptionChecks {
  const checkOptionsObject = <T>(option: string, value: T): T => {
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      throw refuse(option, value, 'must be an options object');
    return value;
  };
  return {
    checkOptionsObject,
    checkFunction(option, value) {
      if (typeof value !== 'function') throw refuse(option, value, 'must be a function');
    },
    checkNonEmptyString(option, value) {
      if (typeof value !== 'string' || value === '') throw refuse(option, value, 'must be a non-empty string');
    },
    checkSignal(option, value) {
      if (value !== undefined && !(value instanceof AbortSignal)) throw refuse(option, value, 'must be an AbortSignal');
    },
    checkDurationMs(option, value) {
      if (value !== undefined && !(typeof value === 'number' && Number.isFinite(value) && value > 0)) {
        throw refuse(option, value, 'must be a positive number of milliseconds');
      }
    },
    checkArray(option, value, check) {
      if (!Array.isArray(value)) throw refuse(option, value, 'must be an array');
      value.forEach((element: unknown, index) => check(element, `${option}[${index}]`));
    },
    checkStore(option, store) {
      const methods = checkOptionsObject(option, store) as Record<string, unknown>;
      for (const method of storeMethods) {
        if (typeof methods[method] !== 'function')
          throw refuse(option, store, `must be a DiscoveryStore (no ${method}() method)`);
      }
    },
    checkOptionalString(option, value) {
      if (value !== undefined && typeof value !== 'string') throw refuse(option, value, 'must be a string');
    },
  };
}
