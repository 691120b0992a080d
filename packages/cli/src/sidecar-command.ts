import { dirname, resolve } from 'node:path';
import { EngineSidecar, type SidecarReport } from '@kvreuse/endpoint';
import type { Transport } from '@kvreuse/native-bindings';
import { admissionGate, declaredProfile } from '@kvreuse/profile-admission';
import type { CommandArgs, OptionSpec } from './args.js';
import type { CliContext, Command } from './command.js';
import { nativeTransport } from './native.js';
import { UsageError } from './errors.js';
import { jsonLinesOf, lineOptions } from './output.js';
import { pathKind } from './path-kind.js';
import { openPublishingStore, startPublishing } from './publishing.js';
import { kvreuseSettings, type Settings } from './settings/all-settings.js';
import {
  resolveCommandSettings,
  settingsFilesFrom,
  settingsHelp,
  settingsOptions,
} from './settings/command-settings.js';

/** Linux's `sun_path` holds 108 bytes, the last a NUL. */
const maxSocketPathBytes = 107;

const options: OptionSpec[] = [
  { name: 'socket', value: '<path>', description: 'where engines connect: a unix socket path that must not exist' },
  {
    name: 'engines',
    value: '<n>',
    description: 'stop once this many engines were withdrawn (default: until interrupted)',
  },
  ...lineOptions,
  ...settingsOptions,
];

function describeReport(report: SidecarReport): string {
  switch (report.kind) {
    case 'connected':
      return `connection ${report.connection}: process ${report.pid} connected`;
    case 'adopted':
      return `connection ${report.connection}: adopted ${report.banks} banks of ${report.workerId} (incarnation ${report.incarnation}, epoch ${report.epoch})`;
    case 'refused':
      return `connection ${report.connection}: refused (${report.reason}): ${report.detail}`;
    case 'withdrawn':
      return (
        `connection ${report.connection}: ${report.workerId} withdrawn: ${report.pinsRevoked} pins revoked (engine-gone), ` +
        `${report.banksReturned} banks returned, ${report.banksRetained} retained, ${report.unmapped ? 'unmapped' : 'mapping kept for retained banks'}` +
        (report.failure === undefined ? '' : ` (stopped short: ${report.failure})`)
      );
  }
}

/** GPU memory is served behind the declared profile's admission gate; without a profile, it is refused. */
function vramGate(settings: Settings, transport: Transport) {
  const profile = declaredProfile(settings, { settings: kvreuseSettings });
  if (profile === undefined) return {};
  const capabilities = transport.capabilities();
  return { admissionGate: admissionGate(profile, { capabilities, settings, composition: kvreuseSettings }) };
}

/** The socket's absolute path, checked before anything is opened: it must not exist, its folder must, and it must fit a unix socket address. */
function socketPathOf(socket: string, cwd: string): string {
  const path = resolve(cwd, socket);
  const refuse = (problem: string): UsageError => new UsageError('sidecar', `--socket ${socket}: ${problem}`);
  if (Buffer.byteLength(path) > maxSocketPathBytes)
    throw refuse(
      `a unix socket path is at most ${maxSocketPathBytes} bytes, and ${path} has ${Buffer.byteLength(path)}`,
    );
  const folder = dirname(path);
  if (pathKind(folder, refuse) !== 'directory') throw refuse(`its folder ${folder} is not a directory`);
  if (pathKind(path, refuse, false) !== 'missing')
    throw new UsageError('sidecar', `--socket ${socket} exists: remove it first if no sidecar uses it`);
  return path;
}

function enginesToServe(args: CommandArgs, context: CliContext): number {
  const text = args.options.get('engines')?.[0];
  const engines = text === undefined ? 0 : Number(text);
  if (text !== undefined && (!/^\d+$/.test(text) || !Number.isSafeInteger(engines) || engines < 1))
    throw new UsageError('sidecar', `--engines is a whole number ≥ 1, not ${JSON.stringify(text)}`);
  if (engines === 0 && context.whenInterrupted === undefined)
    throw new UsageError('sidecar', '--engines <n> is needed where nothing can interrupt the sidecar');
  return engines;
}

export const sidecar: Command = {
  name: 'sidecar',
  summary:
    "Serves inference engines' own KV memory: engines connect to a unix socket and hand over their host memory (a memfd and its layout) or GPU memory (a CUDA IPC handle, served when a declared profile admits it); each is published as its worker's rank and served — pins, verified pulls — until its connection ends.",
  usage: '--socket <path> [--engines <n>] [-o table|json] [--config <file>] [--strict] [setting flags]',
  options,
  help: () =>
    'One line per engine connected, adopted, refused or withdrawn (a JSON object with -o json). The protocol, ' +
    "its messages and the ownership rules are in docs/engines.md. The engines' ranks run on transport.backend " +
    'and publish to the discovery the settings name (sqlite or etcd).\n\n' +
    settingsHelp(kvreuseSettings),
  async run(args, context) {
    const socket = args.options.get('socket')?.[0];
    if (socket === undefined) throw new UsageError(this.name, '--socket <path> is required');
    if (args.positionals.length > 0)
      throw new UsageError(this.name, `unexpected argument ${JSON.stringify(args.positionals[0])}`);
    const path = socketPathOf(socket, context.cwd);
    const engines = enginesToServe(args, context);
    const json = jsonLinesOf(this.name, args);
    const resolved = resolveCommandSettings(args, context);
    const settings = settingsFilesFrom(resolved.settings, context.cwd);
    const transport = nativeTransport(resolved, context.cwd);
    const gate = vramGate(settings, transport);
    let withdrawn = 0;
    let stop = (): void => {};
    const stopped = new Promise<void>((resolveStop) => (stop = resolveStop));
    const store = openPublishingStore(this.name, settings.discovery);
    // Taken before the sidecar serves, which it does within this call: an interrupt from then on stops it.
    const takeBack = context.whenInterrupted?.(async () => stop());
    try {
      const served = await startPublishing(
        store,
        settings.discovery,
        (secret) =>
          new EngineSidecar({
            transport,
            path,
            discovery: store,
            secret,
            settings,
            backend: settings.transport.backend,
            ...gate,
            onReport: (report) => {
              context.stdout(`${json ? JSON.stringify(report) : describeReport(report)}\n`);
              if (report.kind === 'withdrawn' && ++withdrawn === engines) stop();
            },
          }),
      );
      try {
        await stopped;
      } finally {
        await served.close();
        await store.close();
      }
    } finally {
      takeBack?.();
    }
  },
};
