import type { Worker } from '@kvreuse/descriptors';

export type GateVerdict = { readonly pass: true } | { readonly pass: false; readonly reason: string };

/**
 * A condition a complete worker must also meet to be ready. Profile admission is installed as
 * `watchWorkerReadiness`'s `admissionGate` (a worker with `vram` banks is never ready without one);
 * other conditions go in `gates`. A gate that throws fails, with the error as its reason.
 */
export interface ReadinessGate {
  readonly name: string;
  evaluate(worker: Worker): GateVerdict | Promise<GateVerdict>;
  /** For gates whose verdict can change on its own: call `changed` then; returns an unsubscribe. */
  subscribe?(changed: () => void): () => void;
}
