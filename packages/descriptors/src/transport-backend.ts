/** The transports an agent can run on: `ucx` (UCX ucp, across processes) or `loopback` (agents of one process). */
export const transportBackends = ['ucx', 'loopback'] as const;
export type TransportBackend = (typeof transportBackends)[number];
