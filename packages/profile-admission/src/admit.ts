import { isDeepStrictEqual } from 'node:util';
import { messageOf } from '@kvreuse/errors';
import type { SettingsOf } from '@kvreuse/config';
import {
  type AssembleResult,
  assembleWorker,
  geometryFields,
  type TransportBackend,
  type Worker,
} from '@kvreuse/descriptors';
import { blockHashFunction, type inventoryGroup } from '@kvreuse/inventory';
import { InvalidAdmissionInputError } from './errors.js';
import type { profileGroup } from './settings.js';
import {
  checkComposition,
  checkedProfile,
  declaredRoles,
  howToSet,
  type NativeCapabilityName,
  pinnedSettings,
  type Profile,
  settingField,
  type SettingsComposition,
} from './profile.js';

/**
 * What admission reads of the native library, as plain facts: the part of `Transport.capabilities()` of
 * `@kvreuse/native-bindings` it needs, which such a result is as it stands.
 */
export interface NativeCapabilities {
  /** The backends usable in the process that reported them (`loopback`, `ucx`). */
  readonly backends: readonly string[];
  /** Whether GPU memory (`vram`) can be registered, and if not, why. */
  readonly vram: { readonly supported: true } | { readonly supported: false; readonly reason: string };
}

/**
 * The resolved settings admission and activation read: the transport, inventory and profile groups and
 * the router's reuse switches. The settings of any composition holding them will do (the cli's holds
 * every kvreuse group).
 */
export type AdmissionSettings = SettingsOf<[typeof inventoryGroup, typeof profileGroup]> & {
  readonly transport: { readonly backend: TransportBackend };
  readonly router: { readonly enableDecodeToPrefillReuse: boolean; readonly enableDecodeToPrefillGpuReuse: boolean };
};

/** The running facts a profile is admitted against. */
export interface AdmissionFacts {
  /** Complete worker descriptors (`assembleWorker`, or a ready worker of `watchWorkerReadiness`). */
  readonly workers: readonly Worker[];
  readonly capabilities: NativeCapabilities;
  /** The process's resolved settings (`resolve` of its composition, `defineSettings(groups)` of `@kvreuse/config`). */
  readonly settings: AdmissionSettings;
  /** The composition the settings were resolved with (`defineSettings(groups)` of `@kvreuse/config`): a profile not parsed against this very composition is checked against it. */
  readonly composition: SettingsComposition;
  /**
   * The block hash function the workers and routers hash with; by default the one of the installed
   * `@kvreuse/inventory` (`blockHashFunction`), which is what this process hashes with.
   */
  readonly blockHashFunction?: string;
}

/** One way the facts contradict the profile: the profile field, what it expects, what the facts say. */
export interface AdmissionReason {
  /** The profile field, as a path: `geometry.blockTokens`, `roles.decode.tpSize`, `blockHash.seed`, … */
  readonly field: string;
  readonly expected: unknown;
  readonly actual: unknown;
  /** The worker whose descriptor contradicts the profile; undefined for a process-wide fact. */
  readonly workerId: string | undefined;
  readonly message: string;
}

export type AdmissionResult =
  { readonly admitted: true } | { readonly admitted: false; readonly reasons: readonly AdmissionReason[] };

/**
 * Admits a profile against the running facts, failing closed: the profile is admitted only when every
 * fact matches it — the block hash function and seed, the transport backend, the pinned and forbidden
 * settings, the native capabilities it requires, and for every worker its role, parallelism, geometry
 * (each field: block size, layout, …) and the memory of every bank. Otherwise every contradiction is a
 * reason naming the profile field, the expected and the actual value. A worker must be what its rank parts
 * assemble into (`assembleWorker`); one that states other facts is refused (`InvalidAdmissionInputError`).
 */
export function admit(declared: Profile, facts: AdmissionFacts): AdmissionResult {
  checkFacts(facts);
  const profile = checkedProfile(declared, facts.composition);
  const reasons: AdmissionReason[] = [];
  const refuse: Refuse = ({
    field,
    expected,
    actual,
    workerId,
    why,
    expectedWords = `expected ${showValue(expected)}`,
  }) => {
    const who = workerId === undefined ? '' : `worker ${workerId}: `;
    const message = `${who}${field}: ${expectedWords}, actual ${showValue(actual)}${why === undefined ? '' : ` (${why})`}`;
    reasons.push({ field, expected, actual, workerId, message });
  };

  const hashFunction = facts.blockHashFunction ?? blockHashFunction;
  if (profile.blockHash.function !== hashFunction) {
    refuse({
      field: 'blockHash.function',
      expected: profile.blockHash.function,
      actual: hashFunction,
      why: 'workers hashing differently never share a block',
    });
  }
  for (const { setting, value, field } of pinnedSettings(profile)) {
    const actual = settingValue(facts.settings, setting);
    if (!isDeepStrictEqual(actual, value))
      refuse({ field, expected: value, actual, why: howToSet(facts.composition, setting) });
  }
  for (const [setting, values] of Object.entries(profile.settings.forbidden)) {
    const actual = settingValue(facts.settings, setting);
    if (values.some((value) => isDeepStrictEqual(actual, value))) {
      refuse({
        field: settingField('forbidden', setting),
        expected: values,
        expectedWords: `expected none of ${showValue(values)}`,
        actual,
        why: howToSet(facts.composition, setting),
      });
    }
  }
  const { capabilities } = facts;
  if (!capabilities.backends.includes(profile.transport.backend)) {
    refuse({
      field: 'transport.backend',
      expected: profile.transport.backend,
      actual: capabilities.backends,
      why: 'the native library is built without this backend',
    });
  }
  for (const name of profile.nativeCapabilities) {
    const missing = missingCapability(name, capabilities);
    if (missing !== undefined)
      refuse({ field: 'nativeCapabilities', expected: name, actual: missing, why: `the native library lacks ${name}` });
  }
  for (const worker of facts.workers) admitWorker(profile, worker, capabilities, refuse);
  return reasons.length === 0 ? { admitted: true } : { admitted: false, reasons };
}

/** A value as JSON, whole: a native library's reason is quoted in full, never cut. */
function showValue(value: unknown): string {
  return value === undefined ? 'undefined' : JSON.stringify(value);
}

interface Refusal {
  readonly field: string;
  readonly expected: unknown;
  readonly actual: unknown;
  readonly workerId?: string;
  /** Why it matters, or which setting or banks it concerns. */
  readonly why?: string;
  /** The expectation in words, where the expected value alone would mislead (`expected none of […]`). */
  readonly expectedWords?: string;
}

type Refuse = (refusal: Refusal) => void;

function admitWorker(profile: Profile, worker: Worker, capabilities: NativeCapabilities, refuse: Refuse): void {
  const { workerId } = worker;
  const role = profile.roles[worker.role];
  if (role === undefined) {
    refuse({
      field: 'roles',
      expected: declaredRoles(profile).map(({ role: name }) => name),
      actual: worker.role,
      workerId,
      why: 'the profile declares no such role',
    });
    return;
  }
  if (worker.tpSize !== role.tpSize)
    refuse({ field: `roles.${worker.role}.tpSize`, expected: role.tpSize, actual: worker.tpSize, workerId });
  if (worker.ppSize !== role.ppSize)
    refuse({ field: `roles.${worker.role}.ppSize`, expected: role.ppSize, actual: worker.ppSize, workerId });

  // The worker's digest is its parts' geometry's (checkWorker): the fields decide, and name what differs.
  for (const field of geometryFields) {
    if (worker.geometry[field] !== profile.geometry[field]) {
      refuse({
        field: `geometry.${field}`,
        expected: profile.geometry[field],
        actual: worker.geometry[field],
        workerId,
      });
    }
  }

  const kinds = new Map<string, { count: number; first: string }>();
  for (const part of worker.ranks) {
    part.banks.forEach((bank, index) => {
      const seen = kinds.get(bank.memKind);
      if (seen === undefined)
        kinds.set(bank.memKind, {
          count: 1,
          first: `bank ${index} of rank (tp ${part.parallel.tpRank}, pp ${part.parallel.ppRank})`,
        });
      else seen.count++;
    });
  }
  for (const [kind, { count, first }] of kinds) {
    const field = `roles.${worker.role}.memoryKinds`;
    if (!(role.memoryKinds as readonly string[]).includes(kind)) {
      refuse({
        field,
        expected: role.memoryKinds,
        actual: kind,
        workerId,
        why: `${count} ${kind} banks, the first ${first}`,
      });
    } else if (kind === 'vram' && !capabilities.vram.supported && !profile.nativeCapabilities.includes('vram')) {
      refuse({
        field,
        expected: 'vram',
        expectedWords: 'expected vram the native library can register',
        actual: capabilities.vram.reason,
        workerId,
        why: `${count} vram banks, the first ${first}`,
      });
    }
  }
}

/** What the library says instead of the capability, or undefined when it has it. */
function missingCapability(name: NativeCapabilityName, capabilities: NativeCapabilities): unknown {
  if (name === 'vram') return capabilities.vram.supported ? undefined : capabilities.vram.reason;
  return capabilities.backends.includes(name) ? undefined : `backends ${capabilities.backends.join(', ')}`;
}

/** A setting by its code path, in settings of any composition. */
function settingValue(settings: AdmissionSettings, setting: string): unknown {
  const [group, name] = setting.split('.') as [string, string];
  return (settings as Readonly<Record<string, Readonly<Record<string, unknown>> | undefined>>)[group]?.[name];
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

/** Refuses facts of the wrong shape up front, naming the argument. */
export function checkFacts(facts: AdmissionFacts, argument = 'facts'): void {
  if (!isObject(facts))
    throw new InvalidAdmissionInputError(argument, facts, 'must be { workers, capabilities, settings, composition }');
  if (!Array.isArray(facts.workers))
    throw new InvalidAdmissionInputError(
      `${argument}.workers`,
      facts.workers,
      'must be an array of complete worker descriptors',
    );
  facts.workers.forEach((worker, index) => checkWorker(worker, `${argument}.workers[${index}]`));
  checkCapabilities(facts.capabilities, `${argument}.capabilities`);
  checkSettings(facts.settings, `${argument}.settings`);
  checkComposition(facts.composition, `${argument}.composition`);
  checkBlockHashFunction(facts.blockHashFunction, `${argument}.blockHashFunction`);
}

/** The fields of a worker that admission reads, besides its rank parts. */
const workerFields = ['workerId', 'role', 'tpSize', 'ppSize', 'geometry', 'geometryDigest'] as const;

/**
 * Refuses what is not a complete worker descriptor: the worker its own rank parts assemble into. Admission
 * reads the role, parallelism and geometry a worker states; a worker that states others than its parts
 * (a role of no profile field, such as `toString`) would be judged on what it does not serve.
 */
function checkWorker(worker: Worker, argument: string): void {
  if (!isObject(worker) || !Array.isArray(worker.ranks) || !isObject(worker.geometry)) {
    throw new InvalidAdmissionInputError(
      argument,
      worker,
      'must be a complete worker descriptor (assembleWorker of @kvreuse/descriptors)',
    );
  }
  let assembled: AssembleResult;
  try {
    assembled = assembleWorker(worker.ranks);
  } catch (error) {
    const problem = messageOf(error);
    throw new InvalidAdmissionInputError(`${argument}.ranks`, problem, 'must be valid rank parts (parseRankPart)');
  }
  if (!assembled.complete) {
    const { missing, duplicates, conflicts } = assembled;
    throw new InvalidAdmissionInputError(
      `${argument}.ranks`,
      { missing, duplicates, conflicts },
      'must be every rank part of one worker, once (assembleWorker of @kvreuse/descriptors)',
    );
  }
  const { worker: fromParts } = assembled;
  for (const field of workerFields) {
    if (!isDeepStrictEqual(worker[field], fromParts[field])) {
      throw new InvalidAdmissionInputError(
        `${argument}.${field}`,
        worker[field],
        `must be ${showValue(fromParts[field])}, as its rank parts say`,
      );
    }
  }
}

export function checkBlockHashFunction(blockHashFunction: string | undefined, argument: string): void {
  if (blockHashFunction !== undefined && typeof blockHashFunction !== 'string')
    throw new InvalidAdmissionInputError(argument, blockHashFunction, 'must be a string when given');
}

export function checkCapabilities(capabilities: NativeCapabilities, argument: string): void {
  if (
    !isObject(capabilities) ||
    !Array.isArray(capabilities.backends) ||
    !capabilities.backends.every((backend) => typeof backend === 'string') ||
    !isObject(capabilities.vram) ||
    typeof capabilities.vram.supported !== 'boolean' ||
    // Refusals and activation quote the library's reason: without one they would say "undefined".
    (!capabilities.vram.supported && typeof capabilities.vram.reason !== 'string')
  ) {
    throw new InvalidAdmissionInputError(
      argument,
      capabilities,
      'must be the native capabilities (Transport.capabilities() of @kvreuse/native-bindings)',
    );
  }
}

export function checkSettings(settings: AdmissionSettings, argument: string): void {
  if (
    !isObject(settings) ||
    !isObject(settings.router) ||
    !isObject(settings.transport) ||
    !isObject(settings.inventory)
  ) {
    throw new InvalidAdmissionInputError(
      argument,
      settings,
      'must be resolved settings (resolve of a composition, defineSettings of @kvreuse/config)',
    );
  }
  // Activation reads the switches as they are: a string "false" would switch reuse on.
  for (const name of ['enableDecodeToPrefillReuse', 'enableDecodeToPrefillGpuReuse'] as const) {
    const value: unknown = settings.router[name];
    if (typeof value !== 'boolean')
      throw new InvalidAdmissionInputError(`${argument}.router.${name}`, value, 'must be a boolean, as resolved');
  }
}
