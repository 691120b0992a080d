import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { kvreuseSettings, type Settings } from './settings/all-settings.js';
import { assembleWorker, safeParseRankPart, type Worker } from '@kvreuse/descriptors';
import {
  admit,
  builtInProfile,
  type BuiltInProfileName,
  builtInProfileNames,
  builtInProfiles,
  declaredProfile,
  loadProfileFile,
  type Profile,
} from '@kvreuse/profile-admission';
import { checkKeySegment, defaultKeyPrefix, RankPartPublicationError, watchWorkerReadiness } from '@kvreuse/discovery';
import { describeFileFailure } from '@kvreuse/errors';
import type { CommandArgs } from './args.js';
import type { CliContext, Command } from './command.js';
import { openPublishedDiscovery } from './discovery.js';
import { AdmissionRefusedError, InputFileError, UsageError } from './errors.js';
import { profileGroupsHelp } from './help-groups.js';
import { dataOptions, documentFormatOf, renderDocument } from './output.js';
import { nativeCapabilities } from './native.js';
import {
  resolveCommandSettings,
  settingsFilesFrom,
  settingsHelp,
  settingsOptions,
} from './settings/command-settings.js';

function rolesOf(profile: Profile): string {
  return Object.entries(profile.roles)
    .flatMap(([role, shape]) =>
      shape === undefined ? [] : [`${role} TP ${shape.tpSize} PP ${shape.ppSize} (${shape.memoryKinds.join(', ')})`],
    )
    .join(', ');
}

/** A built-in profile by name, or a profile file (relative to the working directory). */
/** A built-in profile by name, or a profile file; a bare word that is neither is taken for a misspelt name. */
function profileNamed(nameOrFile: string, cwd: string): Profile {
  const path = resolve(cwd, nameOrFile);
  const looksLikeName = !nameOrFile.includes('/') && !/\.(json|ya?ml)$/i.test(nameOrFile);
  if ((builtInProfileNames as readonly string[]).includes(nameOrFile) || (looksLikeName && !existsSync(path)))
    return builtInProfile(nameOrFile as BuiltInProfileName, { settings: kvreuseSettings });
  return loadProfileFile(path, { settings: kvreuseSettings });
}

function atMostOne(command: string, positionals: readonly string[], what: string): string | undefined {
  if (positionals.length > 1)
    throw new UsageError(command, `takes one ${what}, got ${positionals.length}: ${positionals.join(' ')}`);
  return positionals[0];
}

export const profilesList: Command = {
  name: 'profiles list',
  summary: 'The built-in deployment profiles: name, version, model and roles.',
  usage: '[-o table|json|yaml]',
  options: dataOptions,
  help: () => '',
  async run(args, context) {
    if (args.positionals.length > 0 || args.settingsArgv.length > 0)
      throw new UsageError(this.name, `unexpected argument ${[...args.positionals, ...args.settingsArgv][0]}`);
    const format = documentFormatOf(this.name, args);
    const profiles = builtInProfiles({ settings: kvreuseSettings });
    if (format !== undefined) {
      context.stdout(
        renderDocument(
          format,
          profiles.map(({ name, version, modelId, roles }) => ({ name, version, modelId, roles })),
        ),
      );
      return;
    }
    const width = Math.max(...profiles.map((profile) => profile.name.length));
    for (const profile of profiles)
      context.stdout(`${profile.name.padEnd(width)}  v${profile.version}  ${profile.modelId}  ${rolesOf(profile)}\n`);
  },
};

export const profilesShow: Command = {
  name: 'profiles show',
  summary: 'One profile in full (JSON, or YAML with -o yaml): a built-in profile by name, or a profile file.',
  usage: '<name|file> [-o json|yaml]',
  options: dataOptions,
  help: () => `built-in profiles: ${builtInProfileNames.join(', ')}\n`,
  async run(args, context) {
    const nameOrFile = atMostOne(this.name, args.positionals, 'profile name or file');
    const format = documentFormatOf(this.name, args);
    if (nameOrFile === undefined)
      throw new UsageError(this.name, `name a profile: one of ${builtInProfileNames.join(', ')}, or a profile file`);
    context.stdout(renderDocument(format ?? 'json', profileNamed(nameOrFile, context.cwd)));
  },
};

/** A worker from a file holding its rank parts (a JSON array, as discovery publishes them), assembled complete. */
function workerFromFile(path: string): Worker {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new InputFileError(path, `cannot read a worker's rank parts: ${describeFileFailure(error)} (--worker)`, {
      cause: error,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new InputFileError(path, `cannot read a worker's rank parts: not JSON: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (!Array.isArray(json)) throw new InputFileError(path, 'must hold a JSON array of rank parts');
  const parts = json.map((input: unknown, index) => {
    const parsed = safeParseRankPart(input);
    if (!parsed.success)
      throw new InputFileError(path, `rank part ${index}: ${parsed.error.message}`, { cause: parsed.error });
    return parsed.data;
  });
  const assembled = assembleWorker(parts);
  if (!assembled.complete) {
    const missing = assembled.missing.map((rank) => `(tp ${rank.tpRank}, pp ${rank.ppRank})`);
    throw new InputFileError(
      path,
      `the rank parts do not make a complete worker${missing.length > 0 ? `: missing ranks ${missing.join(', ')}` : ' (duplicate or inconsistent ranks)'}`,
    );
  }
  return assembled.worker;
}

/** The `--worker-id` values, each a worker id discovery can hold (one key segment). */
function workerIdsOf(args: CommandArgs): string[] {
  return (args.options.get('worker-id') ?? []).map((id) => {
    try {
      return checkKeySegment('workerId', id);
    } catch (error) {
      if (!(error instanceof RankPartPublicationError)) throw error;
      throw new UsageError('profiles check', `--worker-id ${error.reason}, not ${JSON.stringify(id)}`);
    }
  });
}

/**
 * A worker as readiness assembles it from discovery. The gate passes every worker: admission is what
 * this command judges itself, and a worker with `vram` banks is only assembled behind a gate.
 */
async function workersFromDiscovery(
  ids: readonly string[],
  settings: Settings,
  context: CliContext,
): Promise<Worker[]> {
  if (ids.length === 0) return [];
  const store = openPublishedDiscovery('profiles check', settings.discovery, context.cwd);
  try {
    const workers: Worker[] = [];
    for (const id of ids) {
      const watch = await watchWorkerReadiness(store, id, {
        admissionGate: { name: 'profiles check', evaluate: () => ({ pass: true }) },
        onChange: () => {},
        logger: { warn: (message) => context.stderr(`${message}\n`) },
        keyPrefix: defaultKeyPrefix,
      });
      const readiness = watch.current;
      await watch.close();
      if (!readiness.ready)
        throw new UsageError(
          'profiles check',
          `worker ${id} is not complete in discovery: ${readiness.reasons.map((reason) => reason.message).join('; ')}`,
        );
      workers.push(readiness.worker);
    }
    return workers;
  } finally {
    await store.close();
  }
}

export const profilesCheck: Command = {
  name: 'profiles check',
  summary:
    'Admits a profile against the facts — the workers given as rank-part files or found in discovery, the native library, the settings — and prints the verdict with every reason.',
  usage: '[<name|file>] [--worker <file>]… [--worker-id <id>]… [--config <file>] [-o table|json|yaml] [setting flags]',
  options: [
    {
      name: 'worker',
      value: '<file>',
      repeatable: true,
      description: "a worker's rank parts: a JSON array of rank parts (as they are published)",
    },
    {
      name: 'worker-id',
      value: '<id>',
      repeatable: true,
      description: 'a worker found in discovery (the discovery.* settings say where)',
    },
    ...settingsOptions,
    ...dataOptions,
  ],
  help: () =>
    `The profile is the one named (a built-in name or a profile file), else the one the settings declare (profile.name or profile.file).\n\n${settingsHelp(profileGroupsHelp)}`,
  async run(args, context) {
    const nameOrFile = atMostOne(this.name, args.positionals, 'profile name or file');
    const format = documentFormatOf(this.name, args);
    const idsInDiscovery = workerIdsOf(args);
    const resolved = resolveCommandSettings(args, context);
    const settings = settingsFilesFrom(resolved.settings, context.cwd);
    const profile =
      nameOrFile === undefined
        ? declaredProfile(settings, { settings: kvreuseSettings })
        : profileNamed(nameOrFile, context.cwd);
    if (profile === undefined)
      throw new UsageError(this.name, 'no profile: name one, or declare one with --profile-name or --profile-file');
    const workers = [
      ...(args.options.get('worker') ?? []).map((file) => workerFromFile(resolve(context.cwd, file))),
      ...(await workersFromDiscovery(idsInDiscovery, settings, context)),
    ];
    const capabilities = nativeCapabilities(resolved, context.cwd);
    const result = admit(profile, { workers, capabilities, settings, composition: kvreuseSettings });
    const reasons = result.admitted ? [] : result.reasons;
    if (format !== undefined) {
      const workerIds = workers.map((w) => w.workerId);
      context.stdout(
        renderDocument(format, {
          profile: profile.name,
          version: profile.version,
          workers: workerIds,
          admitted: result.admitted,
          reasons,
        }),
      );
    } else {
      const against =
        workers.length === 0
          ? 'no worker (process-wide facts only)'
          : `workers ${workers.map((w) => w.workerId).join(', ')}`;
      context.stdout(
        `${result.admitted ? 'admitted' : 'refused'}: profile ${profile.name} v${profile.version} against ${against}, native ${capabilities.version}\n`,
      );
      for (const reason of reasons) context.stdout(`  - ${reason.message}\n`);
    }
    if (!result.admitted) throw new AdmissionRefusedError(profile.name, reasons.length);
  },
};
