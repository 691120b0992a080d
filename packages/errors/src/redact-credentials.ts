const schemeCharacter = /[A-Za-z0-9+.-]/;
const letter = /[A-Za-z]/;
/** What ends a URL's user information short of its `@`: then it has none. */
const notUserInfo = /[/?#@\s"'`]/;

/**
 * `text` with the credentials of every URL in it replaced by `***` (`http://alice:pw@etcd:2379` →
 * `http://***@etcd:2379`), so that a value echoed in an error, a log or a report names the server
 * but not the password. A URL is `scheme://user-information@`, the scheme a letter then letters, digits,
 * `+`, `.` or `-`. Each `://` is looked at once, back over its scheme and on to its `@`, so a huge string
 * takes time in proportion to its length (a regular expression that tries every start of a scheme takes
 * the square of it).
 */
export function redactCredentials(text: string): string {
  let redacted = '';
  let copied = 0;
  for (let at = text.indexOf('://'); at !== -1; at = text.indexOf('://', Math.max(at + 1, copied))) {
    let scheme = at;
    while (scheme > copied && schemeCharacter.test(text[scheme - 1]!)) scheme--;
    while (scheme < at && !letter.test(text[scheme]!)) scheme++;
    if (scheme === at) continue;
    let end = at + 3;
    while (end < text.length && !notUserInfo.test(text[end]!)) end++;
    if (end === at + 3 || text[end] !== '@') continue;
    redacted += `${text.slice(copied, at + 3)}***@`;
    copied = end + 1;
  }
  return redacted + text.slice(copied);
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
