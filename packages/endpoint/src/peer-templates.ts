// The rank's one cache of transfer templates: the template between two worker incarnations, built once
// for every rank pair of theirs, and each pair's template registered on this agent once per peer
// generation and direction; only the last incarnations of each pair of workers are kept. And the one
// lookup of a peer's regions by its banks' addresses.
import { buildTransferTemplate, type RankPart, type TransferTemplate, type Worker } from '@kvreuse/descriptors';
import type { Agent, Peer, RegisteredTemplate } from '@kvreuse/native-bindings';
import { DrainingError } from '@kvreuse/drain';
import type { RegisteredRank } from '@kvreuse/registry';
import { describeRank } from './errors.js';

/** One rank pair's template to register: `remote` is the other rank's part, loaded as `peer`. */
export interface PairTemplate {
  readonly template: TransferTemplate;
  readonly pair: number;
  readonly direction: 'read' | 'write';
  readonly remote: RankPart;
  readonly peer: Peer;
  /** This rank, registered. */
  readonly local: RegisteredRank;
  /** The error to throw when the peer advertises no region for one of the remote rank's banks. */
  readonly noRegion: (why: string) => Error;
}

/** The region id the peer advertises for each bank of its rank part, by bank number; `noRegion` names the first bank it lacks. */
export function remoteRegionIds(peer: Peer, part: RankPart, noRegion: (why: string) => Error): number[] {
  const advertised = peer.regions();
  return part.banks.map((bank, index) => {
    const region = advertised.find((candidate) => candidate.address === BigInt(bank.address));
    if (region === undefined)
      throw noRegion(
        `${part.workerId} ${describeRank({ tpRank: part.parallel.tpRank, ppRank: part.parallel.ppRank })} advertises no region for its bank ${index}`,
      );
    return region.id;
  });
}

/** A template or registration of one incarnation of the workers it names; a restart replaces it. */
interface Incarnated<T> {
  readonly incarnations: string;
  readonly value: T;
}

export class PeerTemplates {
  readonly #agent: Pick<Agent, 'registerTemplate'>;
  /** Transfer templates by `source worker > destination worker`, of their last incarnations asked about. */
  readonly #built = new Map<string, Incarnated<TransferTemplate>>();
  /** Registered templates by direction, remote worker and pair, of the last remote incarnation and peer generation. */
  readonly #registered = new Map<string, Incarnated<RegisteredTemplate>>();
  #closed = false;

  constructor(agent: Pick<Agent, 'registerTemplate'>) {
    this.#agent = agent;
  }

  /** The template from `source` to `destination`, built once per pair of incarnations; a restart of either replaces it. */
  between(source: Worker, destination: Worker): TransferTemplate {
    const key = `${source.workerId}>${destination.workerId}`;
    const incarnations = `${source.incarnation}>${destination.incarnation}`;
    const built = this.#built.get(key);
    if (built?.incarnations === incarnations) return built.value;
    const template = buildTransferTemplate(source, destination);
    this.#built.set(key, { incarnations, value: template });
    return template;
  }

  /** Whether the templates were released for good (`close()`): a drain has begun and no transfer may start. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * The pair's template on this agent, registered once per direction, remote incarnation and peer
   * generation; the registration of the remote's previous incarnation or generation is released. Once closed, `DrainingError`: the rank's banks are about to be deregistered.
   */
  registered(options: PairTemplate): RegisteredTemplate {
    if (this.#closed)
      throw new DrainingError(
        'register a transfer template',
        'this rank is draining: its transfer templates are closed; no new transfer is started',
      );
    const { template, pair, direction, remote, peer, local } = options;
    const key = `${direction}/${remote.workerId}/${pair}`;
    const incarnations = `${remote.incarnation}/${peer.generation}`;
    const known = this.#registered.get(key);
    if (known?.incarnations === incarnations) return known.value;
    const remoteRegions = remoteRegionIds(peer, remote, options.noRegion);
    const localRegions = local.banks.map((bank) => bank.region as NonNullable<typeof bank.region>);
    const registered = this.#agent.registerTemplate({ peer, template, pair, direction, localRegions, remoteRegions });
    this.#registered.set(key, { incarnations, value: registered });
    // The remote restarted or its peer was reloaded: the superseded registration carries no transfer any more.
    known?.value.release();
    return registered;
  }

  /** Releases every registered template and registers no more (at drain: before any deregistration). */
  close(): void {
    this.#closed = true;
    for (const { value } of this.#registered.values()) value.release();
    this.#registered.clear();
  }
}
