import type { Worker } from '@kvreuse/descriptors';

export type GateVerdict = { readonly pass: true } | { readonly pass: false; readonly reason: string };

/**
 * A condition a complete worker must also meet to be ready (profile admission plugs in here).
 * A gate that throws fails, with the error as its reason.
 */
export interface ReadinessGate {
  readonly name: string;
  evaluate(worker: Worker): GateVerdict | Promise<GateVerdict>;
  /** For gates whose verdict can change on its own: call `changed` then; returns an unsubscribe. */
  subscribe?(changed: () => void): () => void;
}
