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
  /** The registrations transfers hold (`acquire`), with how many hold each. */
  readonly #holders = new Map<RegisteredTemplate, number>();
  /** Registrations a restart superseded while transfers held them: released when the last lets go. */
  readonly #superseded = new Set<RegisteredTemplate>();
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
   * generation, held by the caller's transfer until it gives it back with `release`. The registration of
   * the remote's previous incarnation or generation is released once no transfer holds it. Once closed,
   * `DrainingError`: the rank's banks are about to be deregistered.
   */
  acquire(options: PairTemplate): RegisteredTemplate {
    if (this.#closed)
      throw new DrainingError(
        'register a transfer template',
        'this rank is draining: its transfer templates are closed; no new transfer is started',
      );
    const key = `${options.direction}/${options.remote.workerId}/${options.pair}`;
    const incarnations = `${options.remote.incarnation}/${options.peer.generation}`;
    const known = this.#registered.get(key);
    const registered = known?.incarnations === incarnations ? known.value : this.#register(options);
    this.#registered.set(key, { incarnations, value: registered });
    if (known !== undefined && known.value !== registered) this.#retire(known.value);
    this.#holders.set(registered, (this.#holders.get(registered) ?? 0) + 1);
    return registered;
  }

  #register(options: PairTemplate): RegisteredTemplate {
    const { template, pair, direction, remote, peer, local } = options;
    const remoteRegions = remoteRegionIds(peer, remote, options.noRegion);
    const localRegions = local.banks.map((bank) => bank.region as NonNullable<typeof bank.region>);
    return this.#agent.registerTemplate({ peer, template, pair, direction, localRegions, remoteRegions });
  }

  /** A transfer gives back a registration it acquired: a superseded one no transfer holds is released. */
  release(registered: RegisteredTemplate): void {
    const holders = (this.#holders.get(registered) ?? 0) - 1;
    if (holders > 0) {
      this.#holders.set(registered, holders);
      return;
    }
    this.#holders.delete(registered);
    if (this.#superseded.delete(registered)) registered.release();
  }

  /** The remote restarted or its peer was reloaded: no new transfer posts on `registered` any more. */
  #retire(registered: RegisteredTemplate): void {
    if (this.#holders.has(registered)) this.#superseded.add(registered);
    else registered.release();
  }

  /** Releases every registered template and registers no more (at drain: before any deregistration). */
  close(): void {
    this.#closed = true;
    for (const { value } of this.#registered.values()) value.release();
    for (const registered of this.#superseded) registered.release();
    this.#registered.clear();
    this.#superseded.clear();
    this.#holders.clear();
  }
}
