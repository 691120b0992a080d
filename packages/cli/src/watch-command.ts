import {
  EndpointShapeError,
  type EngineEventSubscriber,
  EngineEventsInputError,
  EngineInventoryFeed,
  type EngineRankSource,
  type EngineRanksOptions,
  type EngineSubscriberEvent,
  maxEngineRanks,
  RankPortError,
  subscribeEngineRanks,
} from '@kvreuse/engine-events';
import { fnv1a64, hashBlockChain, RetainedInventory } from '@kvreuse/inventory';
import type { CommandArgs, OptionSpec } from './args.js';
import type { CliContext, Command } from './command.js';
import { UsageError, WatchStoppedError } from './errors.js';
import { wholeNumberOption } from './option-values.js';
import { jsonLinesOf, lineOptions } from './output.js';

const options: OptionSpec[] = [
  { name: 'vllm', value: '<endpoint>', description: "the engine's KV event publisher of DP rank 0 (tcp://host:port)" },
  { name: 'replay', value: '<endpoint>', description: 'its replay socket of DP rank 0, to repair gaps' },
  {
    name: 'ranks',
    value: '<n>',
    description: `data-parallel ranks, one publisher each on port + rank (default 1, at most ${maxEngineRanks})`,
  },
  { name: 'engine', value: '<name>', description: "the engine's name: rank r is worker <name>/dp<r> (default vllm)" },
  { name: 'block-size', value: '<tokens>', description: "the engine's tokens per block (default 16)" },
  { name: 'prompt', value: '<ids>', description: 'comma-separated token ids: show which worker holds how much of it' },
  { name: 'batches', value: '<n>', description: 'stop after this many batches (default: until interrupted)' },
  ...lineOptions,
];

/** The watch's own hash scheme: it indexes and looks up within its process only, so any salt does. */
const watchSalt = fnv1a64(new TextEncoder().encode('kvreuse.watch'));

function promptOf(args: CommandArgs, blockTokens: number): number[] | undefined {
  const text = args.options.get('prompt')?.[0];
  if (text === undefined) return undefined;
  const parts = text.split(',').map((id) => id.trim());
  const ids = parts.map(Number);
  // Number('') is 0: an empty id (`1,,2`, a trailing comma) is a mistake, not token 0.
  if (parts.some((id) => !/^\d+$/.test(id)) || ids.some((id) => !Number.isSafeInteger(id) || id > 0xffffffff))
    throw new UsageError('watch', `--prompt is comma-separated token ids, not ${JSON.stringify(text)}`);
  // Only whole blocks are held: a shorter prompt would read as one nobody holds.
  if (ids.length < blockTokens)
    throw new UsageError(
      'watch',
      `--prompt has ${ids.length} token ids, fewer than one block of ${blockTokens} (--block-size): no rank can hold any of it`,
    );
  return ids;
}

interface WatchState {
  readonly inventory: RetainedInventory;
  readonly feed: EngineInventoryFeed;
  readonly blockTokens: number;
  readonly prompt: number[] | undefined;
}

function describeEvent(
  workerId: string,
  event: EngineSubscriberEvent,
  subscriber: EngineEventSubscriber,
  state: WatchState,
): string {
  switch (event.kind) {
    case 'gap':
      return `${workerId}: gap, sequence ${event.from} to ${event.to - 1n} missed`;
    case 'replayed':
      return `${workerId}: replayed ${event.batches} batches of ${event.from}…${event.to - 1n}, ${event.unrepaired} not repaired`;
    case 'restart':
      return `${workerId}: publisher restarted (sequence back to ${event.seq}): its inventory starts afresh as ${state.feed.identity(workerId)?.incarnation}`;
    case 'malformed':
      return `${workerId}: malformed frame skipped${event.seq === null ? '' : ` (sequence ${event.seq})`}: ${event.reason}`;
    case 'failed':
      return `${workerId}: stopped following: ${event.reason}`;
    case 'batch': {
      const held = state.feed.heldBlocks(workerId);
      const m = subscriber.metrics();
      const malformed = m.malformed.frames + m.malformed.sequence + m.malformed.payload;
      return (
        `${workerId} #${event.seq}${event.replayed ? ' (replayed)' : ''}: +${event.outcome.stored} −${event.outcome.removed} blocks` +
        ` → held gpu ${held.gpu}, host ${held.host} | gaps ${m.gaps} (${m.unrepairedBatches} unrepaired), replays ${m.replays},` +
        ` restarts ${m.restarts}, malformed ${malformed} | lag ${m.lagMs === null ? '-' : Math.round(m.lagMs)} ms`
      );
    }
  }
}

function promptLine(state: WatchState): string | undefined {
  if (state.prompt === undefined) return undefined;
  const chain = hashBlockChain(state.prompt, { salt: watchSalt, blockTokens: state.blockTokens });
  const holders = state.inventory.longestRetainedPrefix(chain);
  if (holders.length === 0) return `  prompt (${chain.length} blocks): nobody holds its first block: recompute`;
  return `  prompt (${chain.length} blocks): ${holders
    .map((held) => `${held.workerId} holds ${held.blocks} (gpu ${held.gpuBlocks}, host ${held.hostBlocks})`)
    .join('; ')} (advisory)`;
}

function jsonOf({ rank, workerId }: EngineRankSource, event: EngineSubscriberEvent, state: WatchState): string {
  const prompt =
    state.prompt === undefined
      ? undefined
      : state.inventory.longestRetainedPrefix(
          hashBlockChain(state.prompt, { salt: watchSalt, blockTokens: state.blockTokens }),
        );
  return JSON.stringify(
    { workerId, rank, ...event, held: state.feed.heldBlocks(workerId), ...(prompt && { prompt }) },
    (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value),
  );
}

export const watch: Command = {
  name: 'watch',
  summary:
    "Follows an inference engine's KV events (vLLM's or SGLang's ZMQ publisher): the blocks each DP rank holds per tier, gaps, replays, publisher restarts and malformed frames as they happen, and which rank holds how much of a prompt.",
  usage:
    '--vllm <endpoint> [--replay <endpoint>] [--ranks <n>] [--engine <name>] [--block-size <tokens>] [--prompt <ids>] [--batches <n>] [-o table|json]',
  options,
  help: () =>
    "One line per batch applied (or a JSON object with -o json), and one per gap, replay, restart or malformed frame. The engine's block hashes are mapped to a chain hash of the watch's own; nothing is published.\n",
  async run(args, context) {
    const endpoint = args.options.get('vllm')?.[0];
    if (endpoint === undefined) throw new UsageError(this.name, '--vllm <endpoint> is required');
    if (args.positionals.length > 0 || args.settingsArgv.length > 0)
      throw new UsageError(
        this.name,
        `unexpected argument ${JSON.stringify([...args.positionals, ...args.settingsArgv][0])}`,
      );
    const blockTokens = wholeNumberOption('watch', args, 'block-size', 16, 1);
    const batches = wholeNumberOption('watch', args, 'batches', 0, 1);
    if (batches === 0 && context.whenInterrupted === undefined)
      throw new UsageError(this.name, '--batches <n> is needed where nothing can interrupt the watch');
    const inventory = new RetainedInventory();
    const state: WatchState = {
      inventory,
      feed: new EngineInventoryFeed({ inventory, scheme: { salt: watchSalt, blockTokens } }),
      blockTokens,
      prompt: promptOf(args, blockTokens),
    };
    await follow(args, context, state, endpoint, batches);
  },
};

/** The flag of each endpoint option of `subscribeEngineRanks`. */
const flagOfOption = new Map([
  ['options.endpoint', 'vllm'],
  ['options.replayEndpoint', 'replay'],
]);

/**
 * Every rank's subscriber. An endpoint refused, for any rank (one no rank's can be derived from, or one ZMQ
 * cannot connect to), is the usage error of its flag it is, before any rank is followed.
 */
async function subscribeRanks(options: EngineRanksOptions): Promise<EngineEventSubscriber[]> {
  try {
    return await subscribeEngineRanks(options);
  } catch (error) {
    if (!(error instanceof EngineEventsInputError)) throw error;
    const flag = flagOfOption.get(error.argument);
    if (flag === undefined) throw error;
    throw new UsageError('watch', endpointProblem(flag, error));
  }
}

function endpointProblem(flag: string, error: EngineEventsInputError): string {
  if (error instanceof RankPortError) return `--${flag} ${error.endpoint} ${error.reason}`;
  if (error instanceof EndpointShapeError)
    return `--${flag} is tcp://host:port, ipc://… or inproc://…, not ${JSON.stringify(error.value)}`;
  return `--${flag}: ${error.reason}`;
}

async function follow(
  args: CommandArgs,
  context: CliContext,
  state: WatchState,
  endpoint: string,
  batches: number,
): Promise<void> {
  const engine = args.options.get('engine')?.[0] ?? 'vllm';
  const replay = args.options.get('replay')?.[0];
  const ranks = wholeNumberOption('watch', args, 'ranks', 1, 1, maxEngineRanks);
  const json = jsonLinesOf('watch', args);
  let applied = 0;
  const failed: string[] = [];
  let stop: (failure?: WatchStoppedError) => void = () => {};
  const stopped = new Promise<void>((resolve, reject) => (stop = (failure) => (failure ? reject(failure) : resolve())));
  let subscribers: EngineEventSubscriber[] = [];
  let takeBack: (() => void) | undefined;
  // The ranks subscribed are closed however this ends.
  try {
    subscribers = await subscribeRanks({
      engine,
      endpoint,
      ...(replay === undefined ? {} : { replayEndpoint: replay }),
      ranks,
      feed: state.feed,
      onEvent: (event, source) => {
        const { workerId, subscriber } = source;
        if (json) context.stdout(`${jsonOf(source, event, state)}\n`);
        else {
          const prompt = event.kind === 'batch' ? promptLine(state) : undefined;
          context.stdout(
            `${describeEvent(workerId, event, subscriber, state)}\n${prompt === undefined ? '' : `${prompt}\n`}`,
          );
        }
        if (event.kind === 'batch' && ++applied === batches) stop();
        // A rank that stopped is said on its own line; the watch goes on while another rank is followed.
        if (event.kind === 'failed' && failed.push(`${workerId}: ${event.reason}`) === ranks)
          stop(new WatchStoppedError(failed));
      },
    });
    takeBack = context.whenInterrupted?.(async () => {
      stop();
      await Promise.all(subscribers.map((subscriber) => subscriber.close()));
    });
    await stopped;
  } finally {
    takeBack?.();
    await Promise.all(subscribers.map((subscriber) => subscriber.close()));
  }
}
