import type { TransportBackend } from '@kvreuse/descriptors';

/** The transports an agent can run on: `ucx` (UCX ucp, across processes) or `loopback` (agents of one process). */
export type Backend = TransportBackend;

/** KVT_BACKEND_* */
export const backendIds: { readonly [B in Backend]: number } = { loopback: 1, ucx: 2 };
