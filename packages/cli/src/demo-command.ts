// `kvreuse demo`: the main job (src/demo/main-job.ts), with its progress live on stdout and its
// summary last, one line; with `-o json|yaml` (or `--json`) the summary document is all of stdout and
// the progress goes to stderr.
import { exampleSettingsPath } from './settings/example.js';
import { kvreuseSettings, type ResolvedSettings, type Settings } from './settings/all-settings.js';
import type { Backend, Capabilities } from '@kvreuse/native-bindings';
import { openClusterSecret } from '@kvreuse/discovery';
import type { CommandArgs, OptionSpec } from './args.js';
import type { CliContext, Command } from './command.js';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findCheckout } from './checkout.js';
import { demoProcesses, type MainJobOptions, runMainJob } from './demo/main-job.js';
import { engineSummaryLine, runEngineJob } from './demo/engine-job.js';
import { summaryLine } from './demo/demo-summary.js';
import { NotACheckoutError, UsageError } from './errors.js';
import { type LocalEtcd, startLocalEtcd } from './local-etcd.js';
import { nativeCapabilities, requireUcx } from './native.js';
import { dataOptions, documentFormatOf, renderDocument } from './output.js';
import { logFormatOption, logOption, openRequestLog, type RequestLog } from './request-log.js';
import {
  describeSettingsFile,
  noSettingsFile,
  resolveCommandSettings,
  settingsFileOf,
  settingsFilesFrom,
  settingsHelp,
  settingsOptions,
} from './settings/command-settings.js';

const backends: readonly Backend[] = ['ucx', 'loopback'];
const maxPort = 65_535;
const backendOption: OptionSpec = {
  name: 'backend',
  value: '<ucx|loopback>',
  description: 'the transport of the ranks (default ucx)',
};
const engineOption: OptionSpec = {
  name: 'engine',
  value: '<test>',
  description:
    "the decode side is an inference engine with a kvreuse sidecar, the router fed by the engine's KV events: test (the checkout's test engine)",
};
const holdOption: OptionSpec = {
  name: 'hold',
  description:
    'after its steps, keep the router and the ranks still running serving their metrics until SIGINT or SIGTERM, then drain as usual (needs --endpoint-metrics-port)',
};

const unboundedLookupOption: OptionSpec = {
  name: 'unbounded-lookup',
  description:
    "the router's lookups run to their end however long they take, the lookup budget still priced into each pull: no lookup passes it on a busy machine",
};

/** `--hold`: how the job waits for the signal that ends its hold; undefined without it. */
function holdOf(args: CommandArgs, settings: Settings, context: CliContext): (() => Promise<string>) | undefined {
  if (!args.options.has('hold')) return undefined;
  if (settings.endpoint.metricsPort === 0)
    throw new UsageError('demo', '--hold keeps the demo serving its metrics: give --endpoint-metrics-port <port>');
  const { nextSignal } = context;
  if (nextSignal === undefined)
    throw new UsageError('demo', '--hold waits for SIGINT or SIGTERM: this runCli was given no nextSignal');
  return nextSignal;
}

/** The ranks' transport: `--backend`, else `transport.backend`. Both on the command line is an error naming both. */
function backendOf(args: CommandArgs, { settings, provenance }: ResolvedSettings): Backend {
  const [backend] = args.options.get('backend') ?? [];
  if (backend === undefined) return settings.transport.backend;
  if (!(backends as readonly string[]).includes(backend))
    throw new UsageError('demo', `--backend must be one of ${backends.join(', ')}; got ${JSON.stringify(backend)}`);
  if (provenance.transport.backend.source === 'argv')
    throw new UsageError(
      'demo',
      `--backend ${backend} and --transport-backend ${settings.transport.backend} both set the ranks' transport; give one`,
    );
  return backend as Backend;
}

/**
 * `--engine test`: the checkout around this module, whose test engine runs as the decode side; undefined
 * without it. It needs UCX (the sidecar is another process), SQLite discovery and no `--hold`.
 */
function engineCheckoutOf(args: CommandArgs, settings: Settings, backend: Backend): string | undefined {
  const [engine] = args.options.get('engine') ?? [];
  if (engine === undefined) return undefined;
  if (engine !== 'test') throw new UsageError('demo', `--engine must be test; got ${JSON.stringify(engine)}`);
  if (backend !== 'ucx')
    throw new UsageError(
      'demo',
      '--engine test needs the ucx backend: the sidecar serving the engine is another process',
    );
  if (settings.discovery.backend !== 'sqlite')
    throw new UsageError(
      'demo',
      '--engine test runs on SQLite discovery (a fresh file per run): give --discovery-backend sqlite',
    );
  if (args.options.has('hold')) throw new UsageError('demo', '--engine test and --hold cannot be given together');
  const here = dirname(fileURLToPath(import.meta.url));
  const checkout = findCheckout(here);
  if (checkout === undefined)
    throw new NotACheckoutError(
      'demo',
      here,
      "--engine test runs the checkout's tools/test-engine, which no installed package holds",
    );
  return checkout;
}

/** etcd discovery whose endpoints no file, variable or flag gave: the run gets an etcd of its own. */
function wantsLocalEtcd({ settings, provenance }: ResolvedSettings): boolean {
  return settings.discovery.backend === 'etcd' && provenance.discovery.etcdEndpoints.source === 'default';
}

function onLocalEtcd(settings: Settings, etcd: LocalEtcd | undefined): Settings {
  return etcd === undefined
    ? settings
    : { ...settings, discovery: { ...settings.discovery, etcdEndpoints: [etcd.url] } };
}

/** What both modes of the job are given: the settings, the native library, the progress and request log, the interrupt handling. */
function jobOptions(
  args: CommandArgs,
  resolved: ResolvedSettings,
  settings: Settings,
  capabilities: Capabilities,
  backend: Backend,
  progress: (line: string) => void,
  requestLog: RequestLog,
  context: CliContext,
): MainJobOptions {
  return {
    settings,
    capabilities,
    backend,
    progress,
    requestServed: requestLog.served,
    givenPriors: {
      blockUs: resolved.provenance.router.transferSourceEstimatedBlockUs.source !== 'default',
      prefillTokenUs: resolved.provenance.router.transferSourcePrefillTokenUs.source !== 'default',
    },
    unboundedLookup: args.options.has('unbounded-lookup'),
    ...(context.whenInterrupted === undefined ? {} : { whenInterrupted: context.whenInterrupted }),
  };
}

export const demo: Command = {
  name: 'demo',
  summary:
    'The main job: a decode worker of TP 2 and a prefill worker of TP 1 as OS processes hand turn 1 off with WRITEs; the router routes turn 2, and the prefill worker pulls and verifies the 42-block prefix from both decode ranks and its receipt calibrates the router; then a refused request, GPU reuse refused by admission, a decode rank killed mid-pull, the other stopped while the prefill holds its pin, and every drain report with the pins it waited for.',
  usage:
    '[--config <file>] [--backend <ucx|loopback>] [--engine test] [--hold] [--unbounded-lookup] [-o table|json|yaml] [--log <file>] [--log-format text|json] [setting flags]',
  options: [
    ...settingsOptions,
    backendOption,
    engineOption,
    holdOption,
    unboundedLookupOption,
    ...dataOptions,
    logOption,
    logFormatOption,
  ],
  help: () =>
    'Progress and the summary line go to stdout; with -o json or -o yaml (--json) stdout holds the summary document only, and the progress goes to stderr. ' +
    'The request log (one line per request with its receipt: blocks, bytes, checksum verification, ms, what was recomputed and why; a pino JSON line with --log-format json) goes to stderr, or to --log <file>.\n\n' +
    'Discovery: a fresh SQLite file per run by default. --discovery-backend etcd uses the etcd that --discovery-etcd-endpoints (or KVREUSE_DISCOVERY_ETCD_ENDPOINTS, or the settings file) names; ' +
    'without endpoints, the demo starts a local etcd for the run on free loopback ports, with a temporary data dir, and stops it and removes its data when the run ends, fails or is interrupted (SIGINT, SIGTERM). ' +
    'That needs the etcd binary on PATH (sudo apt-get install -y etcd-server).\n\n' +
    'The pull verifies checksums as --endpoint-verify <full|sampled|off> says. With --endpoint-metrics-port <port>, each demo process serves its metrics on a port of its own, ' +
    "from <port> up (the three ranks, then this process with its router's decisions), at the URL its progress line prints: `kvreuse inspect --metrics <url>` reads it while the demo runs, " +
    'and with --hold until SIGINT or SIGTERM.\n\n' +
    `Settings: the settings file (--config <file>, else KVREUSE_CONFIG, else ./kvreuse.yaml; without one the bundled example, where reuse is on), then KVREUSE_* variables, then setting flags. ` +
    '--backend is transport.backend: give it or --transport-backend, not both.\n\n' +
    "--engine test (from a checkout): the decode side is the checkout's test engine, which owns its KV memory and publishes vLLM's KV events on 127.0.0.1, " +
    "served by a kvreuse sidecar; the router is fed by the engine's events, the prefill pulls the routed prefix from the sidecar, verified, and the run reports what it left behind. " +
    'It needs the ucx backend and SQLite discovery, and takes no --hold.\n\n' +
    'The router gives each lookup router.transfer_source_lookup_budget_ms of its own work, and prices that budget into each pull. On a busy machine a lookup can pass it and turn 2 is recomputed (budget-exceeded). ' +
    "--unbounded-lookup lets every lookup run to its end, still pricing the budget: no lookup passes it, however busy the machine is (for scripts and CI that check the demo's output; the priors it measures still follow the machine's speed unless given as settings).\n\n" +
    settingsHelp(kvreuseSettings),
  async run(args, context: CliContext) {
    if (args.positionals.length > 0)
      throw new UsageError(this.name, `unexpected argument ${JSON.stringify(args.positionals[0])}`);
    const format = documentFormatOf(this.name, args);
    const file = settingsFileOf(args, context);
    const resolved = resolveCommandSettings(args, context, exampleSettingsPath);
    const backend = backendOf(args, resolved);
    const fromCwd = settingsFilesFrom(resolved.settings, context.cwd);
    const settings = { ...fromCwd, transport: { ...fromCwd.transport, backend } };
    if (settings.discovery.backend === 'memory') {
      throw new UsageError(
        this.name,
        'discovery.backend = memory holds one process only; use sqlite (a fresh file per run) or etcd (a local one per run, or --discovery-etcd-endpoints)',
      );
    }
    const { metricsPort } = settings.endpoint;
    if (metricsPort + demoProcesses - 1 > maxPort) {
      throw new UsageError(
        this.name,
        `endpoint.metrics_port = ${metricsPort} leaves no port for some of the ${demoProcesses} demo processes (each serves its metrics on the next port); at most ${maxPort - demoProcesses + 1}`,
      );
    }
    const checkout = engineCheckoutOf(args, settings, backend);
    const hold = holdOf(args, settings, context);
    // A named secret file every rank would refuse is refused here, as the settings error it is.
    if (settings.discovery.secretFile !== '') openClusterSecret(settings.discovery);
    const capabilities =
      backend === 'ucx' ? requireUcx(this.name, resolved, context.cwd) : nativeCapabilities(resolved, context.cwd);
    const progress = (line: string): void => (format === undefined ? context.stdout : context.stderr)(`${line}\n`);
    const requestLog = openRequestLog(args, context);
    let etcd: LocalEtcd | undefined;
    try {
      etcd = wantsLocalEtcd(resolved)
        ? await startLocalEtcd({
            command: this.name,
            env: context.env,
            ...(context.whenInterrupted === undefined ? {} : { whenInterrupted: context.whenInterrupted }),
          })
        : undefined;
      if (etcd !== undefined)
        progress(
          `discovery: started a local etcd at ${etcd.url} for this run (data in ${etcd.dataDir}; stopped and removed when the run ends)`,
        );
      progress(
        `settings file: ${file === undefined ? `the bundled example ${exampleSettingsPath} (${noSettingsFile})` : describeSettingsFile(file)}`,
      );
      if (checkout !== undefined) {
        const job = jobOptions(args, resolved, settings, capabilities, backend, progress, requestLog, context);
        const summary = await runEngineJob({ ...job, checkout });
        context.stdout(format === undefined ? `${engineSummaryLine(summary)}\n` : renderDocument(format, summary));
        return;
      }
      const job = jobOptions(
        args,
        resolved,
        onLocalEtcd(settings, etcd),
        capabilities,
        backend,
        progress,
        requestLog,
        context,
      );
      const summary = await runMainJob({ ...job, ...(hold === undefined ? {} : { hold }) });
      context.stdout(format === undefined ? `${summaryLine(summary)}\n` : renderDocument(format, summary));
    } finally {
      requestLog.close();
      await etcd?.stop();
    }
  },
};
