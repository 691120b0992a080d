/** `scheme://user:password@` (or `scheme://token@`): the user information of a URL, up to its `@`. */
const urlUserInfo = /([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/?#@\s"'`]+@/g;

/**
 * `text` with the credentials of every URL in it replaced by `***` (`http://alice:pw@etcd:2379` →
 * `http://***@etcd:2379`), so that a value echoed in an error, a log or a report names the server
 * but not the password.
 */
export function redactCredentials(text: string): string {
  return text.replace(urlUserInfo, '$1***@');
}

/**
 * `value` with `redactCredentials` applied to every string in it, inside arrays and plain objects too;
 * anything else is returned as it is.
 */
export function redactValue<T>(value: T): T {
  if (typeof value === 'string') return redactCredentials(value) as T;
  if (Array.isArray(value)) return value.map((element: unknown) => redactValue(element)) as T;
  if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([key, property]) => [key, redactValue(property)])) as T;
  }
  return value;
}
