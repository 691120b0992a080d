import type { ReadinessGate } from '@kvreuse/discovery';
import {
  admit,
  type AdmissionSettings,
  checkBlockHashFunction,
  checkCapabilities,
  checkSettings,
  type NativeCapabilities,
} from './admit.js';
import { InvalidAdmissionInputError } from './errors.js';
import { checkComposition, checkedProfile, type Profile, type SettingsComposition } from './profile.js';

/** The process-wide facts a gate admits each worker with. */
export interface AdmissionGateContext {
  readonly capabilities: NativeCapabilities;
  readonly settings: AdmissionSettings;
  /** As in `AdmissionFacts`: the composition the settings were resolved with. */
  readonly composition: SettingsComposition;
  /** As in `AdmissionFacts`: by default the installed `@kvreuse/inventory`'s `blockHashFunction`. */
  readonly blockHashFunction?: string;
}

/**
 * The declared profile as a readiness gate of `@kvreuse/discovery`: install it as
 * `watchWorkerReadiness`'s `admissionGate`. A complete worker passes only when `admit(profile,
 * { workers: [worker], ...context })` admits it; otherwise the gate's reason lists every admission
 * reason. The profile and the context are checked when the gate is made.
 */
export function admissionGate(profile: Profile, context: AdmissionGateContext): ReadinessGate {
  if (typeof context !== 'object' || context === null) {
    throw new InvalidAdmissionInputError('context', context, 'must be { capabilities, settings, composition }');
  }
  checkCapabilities(context.capabilities, 'context.capabilities');
  checkSettings(context.settings, 'context.settings');
  checkComposition(context.composition, 'context.composition');
  checkBlockHashFunction(context.blockHashFunction, 'context.blockHashFunction');
  const { capabilities, settings, composition, blockHashFunction } = context;
  const checked = checkedProfile(profile, composition);
  return {
    name: `profile ${checked.name}`,
    evaluate(worker) {
      const result = admit(checked, {
        workers: [worker],
        capabilities,
        settings,
        composition,
        ...(blockHashFunction === undefined ? {} : { blockHashFunction }),
      });
      if (result.admitted) return { pass: true };
      return { pass: false, reason: result.reasons.map((reason) => reason.message).join('; ') };
    },
  };
}
