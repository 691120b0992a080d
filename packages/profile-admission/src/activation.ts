import { admit, type AdmissionFacts, type AdmissionResult, checkFacts } from './admit.js';
import { InvalidAdmissionInputError } from './errors.js';
import { checkedProfile, type Profile } from './profile.js';

/** What reuse a deployment runs: none, from host memory only, or from GPU memory too. */
export type ActivationMode = 'off' | 'host-only' | 'gpu';

/** The conditions of GPU reuse, in the order they are judged. */
export const activationConditions = [
  'reuse-setting',
  'gpu-reuse-setting',
  'profile-declared',
  'profile-admitted',
  'vram-capable',
  'vram-sources',
] as const;
export type ActivationConditionName = (typeof activationConditions)[number];

export interface ActivationCondition {
  readonly name: ActivationConditionName;
  readonly holds: boolean;
  /** Why it holds or not, with the setting, profile, capability or bank and its value. */
  readonly detail: string;
}

export interface ActivationFacts extends AdmissionFacts {
  /** The declared deployment profile, or undefined when none is declared. */
  readonly profile: Profile | undefined;
}

export interface Activation {
  readonly mode: ActivationMode;
  /** Why the mode is what it is: the conditions that do not hold and decide it (empty for `gpu`). */
  readonly reasons: readonly string[];
  /** Every condition, judged. */
  readonly conditions: readonly ActivationCondition[];
  /** The declared profile's admission, when one is declared. */
  readonly admission: AdmissionResult | undefined;
}

/**
 * Says which reuse runs, and exactly why. GPU reuse activates only when both reuse settings are on,
 * a profile is declared and admitted, the native library can register `vram`, and the admitted
 * source (decode) workers have `vram` banks. Reuse is off when its setting is off, or when the
 * declared profile is refused for a process-wide fact (block hash, settings, transport, native
 * capabilities: its readiness gate then refuses every worker); otherwise it runs host-only, and the
 * reasons say which conditions failed. A worker the profile refuses on its own descriptor never
 * becomes ready, so it is not counted as a source, and the details name it.
 */
export function explainActivation(facts: ActivationFacts): Activation {
  checkFacts(facts);
  if (!('profile' in facts)) {
    throw new InvalidAdmissionInputError(
      'facts.profile',
      undefined,
      'must be given: the declared profile, or undefined when none is declared',
    );
  }
  const { settings, capabilities, workers } = facts;
  const profile = facts.profile === undefined ? undefined : checkedProfile(facts.profile, facts.composition);
  const admission = profile === undefined ? undefined : admit(profile, facts);
  const reuse = settings.router.enableDecodeToPrefillReuse;
  const gpuReuse = settings.router.enableDecodeToPrefillGpuReuse;
  const reasons = admission === undefined || admission.admitted ? [] : admission.reasons;
  // A process-wide contradiction refuses every worker at the gate; a worker's own only that worker.
  const processWide = reasons.filter((reason) => reason.workerId === undefined);
  const refused = new Map<string, string[]>();
  for (const { workerId, message } of reasons)
    if (workerId !== undefined) refused.set(workerId, [...(refused.get(workerId) ?? []), message]);
  const sources = workers.filter((worker) => worker.role === 'decode');
  const admittedSources = sources.filter((worker) => !refused.has(worker.workerId));
  const sourceBanks = admittedSources.flatMap((worker) => worker.ranks.flatMap((part) => part.banks));
  const vramBanks = sourceBanks.filter((bank) => bank.memKind === 'vram').length;
  const refusedWorkers = [...refused]
    .map(([workerId, messages]) => `${workerId} is refused and never becomes ready (${messages.join('; ')})`)
    .join('; ');

  const conditions: ActivationCondition[] = [
    {
      name: 'reuse-setting',
      holds: reuse,
      detail: `router.enable_decode_to_prefill_reuse is ${reuse ? 'on' : 'off'}`,
    },
    {
      name: 'gpu-reuse-setting',
      holds: gpuReuse,
      detail: `router.enable_decode_to_prefill_gpu_reuse is ${gpuReuse ? 'on' : 'off'}`,
    },
    {
      name: 'profile-declared',
      holds: profile !== undefined,
      detail:
        profile === undefined
          ? 'no deployment profile is declared'
          : `profile ${profile.name} (version ${profile.version}) is declared`,
    },
    {
      name: 'profile-admitted',
      holds: profile !== undefined && processWide.length === 0,
      detail:
        profile === undefined
          ? 'no deployment profile is declared, so none is admitted'
          : processWide.length > 0
            ? `profile ${profile.name} is refused: ${processWide.map((reason) => reason.message).join('; ')}`
            : `profile ${profile.name} is admitted${refused.size === 0 ? '' : `, but worker ${refusedWorkers}`}`,
    },
    {
      name: 'vram-capable',
      holds: capabilities.vram.supported,
      detail: capabilities.vram.supported
        ? 'the native library can register vram'
        : `the native library cannot register vram: ${capabilities.vram.reason}`,
    },
    {
      name: 'vram-sources',
      holds: vramBanks > 0,
      detail:
        sources.length === 0
          ? 'no source (decode) worker is known'
          : admittedSources.length === 0
            ? `no source (decode) worker is admitted: worker ${refusedWorkers}`
            : `${vramBanks} of the ${sourceBanks.length} banks of the source workers (${admittedSources.map((worker) => worker.workerId).join(', ')}) are vram`,
    },
  ];
  return { ...decideMode(conditions, profile !== undefined), conditions, admission };
}

/** Whether a process may put its banks in GPU memory, and why not. */
export interface GpuPlacement {
  /** Every condition of GPU reuse holds but the one the placement itself decides (`vram-sources`). */
  readonly admissible: boolean;
  /** The details of the conditions that fail (empty when admissible). */
  readonly reasons: readonly string[];
}

/**
 * Asked before a process places its banks: would GPU reuse activate once the source workers' banks are
 * vram? It judges every condition of `explainActivation` but `vram-sources`, which that placement decides;
 * no worker is needed.
 */
export function explainGpuPlacement(facts: Omit<ActivationFacts, 'workers'>): GpuPlacement {
  if (typeof facts !== 'object' || facts === null)
    throw new InvalidAdmissionInputError('facts', facts, 'must be { profile, capabilities, settings, composition }');
  const { conditions } = explainActivation({ ...facts, workers: [] });
  const failing = conditions.filter((condition) => !condition.holds && condition.name !== 'vram-sources');
  return { admissible: failing.length === 0, reasons: failing.map((condition) => condition.detail) };
}

/**
 * The mode the judged conditions decide, and the details of the conditions that decide it: off when reuse is off
 * or a declared profile is refused, host-only when any other condition fails, otherwise gpu.
 */
function decideMode(
  conditions: readonly ActivationCondition[],
  profileDeclared: boolean,
): Pick<Activation, 'mode' | 'reasons'> {
  const failing = (name: ActivationConditionName): ActivationCondition | undefined =>
    conditions.find((condition) => condition.name === name && !condition.holds);
  const off = failing('reuse-setting') ?? (profileDeclared ? failing('profile-admitted') : undefined);
  if (off !== undefined) return { mode: 'off', reasons: [off.detail] };
  const hostOnly = conditions.filter((condition) => !condition.holds && condition.name !== 'profile-admitted');
  if (hostOnly.length > 0) return { mode: 'host-only', reasons: hostOnly.map((condition) => condition.detail) };
  return { mode: 'gpu', reasons: [] };
}
