// What a UCX agent may use: UCX's NET_DEVICES and TLS, set per agent instead of through the process's environment.
import { InvalidArgumentError } from './errors.js';

/** What a UCX agent is confined to: UCX's `NET_DEVICES` and `TLS`, e.g. `lo` and `sm,self`. */
export interface UcxConfinement {
  /** Comma-separated devices, e.g. `lo` or `mlx5_0:1,eth1`; empty: UCX's choice. */
  readonly netDevices?: string;
  /** Comma-separated transports, e.g. `sm,self`, `tcp` or `rc,sm,self`; empty: UCX's choice. */
  readonly transports?: string;
}

/** The longest value the library takes (KVT_MAX_UCX_OPTION). */
const maxOptionBytes = 255;

/**
 * The values to hand the library (null: UCX's own choice), or undefined when neither is set; refuses a
 * value that is not a string of at most 255 printable ASCII bytes without spaces.
 */
export function confinement(
  ucx: UcxConfinement | undefined,
): { netDevices: string | null; transports: string | null } | undefined {
  if (ucx === undefined) return undefined;
  if (typeof ucx !== 'object' || ucx === null)
    throw new InvalidArgumentError('ucx', ucx, 'must be an object { netDevices?, transports? }');
  const value = (name: 'netDevices' | 'transports'): string | null => {
    const given: unknown = ucx[name];
    if (given === undefined || given === '') return null;
    if (typeof given !== 'string' || given.length > maxOptionBytes || !/^[\x21-\x7e]+$/.test(given))
      throw new InvalidArgumentError(
        `ucx.${name}`,
        given,
        `must be at most ${maxOptionBytes} printable ASCII characters without spaces`,
      );
    return given;
  };
  const confined = { netDevices: value('netDevices'), transports: value('transports') };
  return confined.netDevices === null && confined.transports === null ? undefined : confined;
}
