/**
 * Declared deployment profiles, built-in public profiles, admission against the running facts, GPU-reuse activation, and admission as a readiness gate.
 *
 * @packageDocumentation
 * @module \@kvreuse/profile-admission
 */
export {
  InvalidAdmissionInputError,
  InvalidProfileError,
  ProfileAdmissionError,
  type ProfileAdmissionErrorCode,
  ProfileFileError,
  type ProfileIssue,
  UnknownProfileError,
} from './errors.js';
export {
  nativeCapabilityNames,
  type NativeCapabilityName,
  parseProfile,
  type Profile,
  type ProfileInput,
  type ProfileRole,
  profileSchemaOf,
  type ParseProfileOptions,
  type ProfileSettingsOptions,
  type SettingsComposition,
  profileSchemaVersions,
  safeParseProfile,
  type SafeParseProfileResult,
} from './profile.js';
export { loadProfileFile } from './profile-file.js';
export { declaredProfile } from './declared.js';
export { builtInProfile, type BuiltInProfileName, builtInProfileNames, builtInProfiles } from './built-in.js';
export {
  admit,
  type AdmissionFacts,
  type AdmissionSettings,
  type AdmissionReason,
  type AdmissionResult,
  type NativeCapabilities,
} from './admit.js';
export {
  type Activation,
  type ActivationCondition,
  type ActivationConditionName,
  activationConditions,
  type ActivationFacts,
  type ActivationMode,
  explainActivation,
  explainGpuPlacement,
  type GpuPlacement,
} from './activation.js';
export { admissionGate, type AdmissionGateContext } from './gate.js';
export { profileGroup } from './settings.js';
