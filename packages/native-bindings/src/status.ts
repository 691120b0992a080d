/** The names of the native library's error statuses, as `NativeTransportError.code` carries them. */
export const statusCodeNames = [
  'INVALID_PARAM',
  'BACKEND',
  'NOT_FOUND',
  'MISMATCH',
  'NOT_ALLOWED',
  'BUSY',
  'NOT_SUPPORTED',
  'REMOTE_DISCONNECT',
  'CANCELED',
  'TIMEOUT',
  'NO_MEMORY',
] as const;

export type StatusCodeName = (typeof statusCodeNames)[number];

export const STATUS_OK = 0;
export const STATUS_IN_PROGRESS = 1;

/** KVT_ERR_INVALID_PARAM is -1, KVT_ERR_BACKEND -2, … in the order of `statusCodeNames`. */
export function statusCodeName(status: number): StatusCodeName | `UNKNOWN_STATUS_${number}` {
  return statusCodeNames[-status - 1] ?? `UNKNOWN_STATUS_${status}`;
}

export function statusOf(code: StatusCodeName): number {
  return -(statusCodeNames.indexOf(code) + 1);
}

export function isStatusCodeName(value: unknown): value is StatusCodeName {
  return typeof value === 'string' && (statusCodeNames as readonly string[]).includes(value);
}
