// What both examples share: one worker of tensor-parallel size 1 as a serving framework would set it up
// for kvreuse — a native agent and the ReuseEndpoint it opens (KV banks laid out for Qwen3-0.6B,
// allocated by kvreuse, registered and published) — plus the conversation both workers hash and the KV
// content its blocks hold.
import { randomUUID } from 'node:crypto';
import { defineSettings } from '@kvreuse/config';
import { discoveryGroup } from '@kvreuse/discovery';
import { drainGroup } from '@kvreuse/drain';
import { BlockPool, endpointGroup, ReuseEndpoint } from '@kvreuse/endpoint';
import { blockHashScheme, hashBlockChain, inventoryGroup } from '@kvreuse/inventory';
import { loadTransport, transportGroup } from '@kvreuse/native-bindings';
import { referenceGeometries } from '@kvreuse/descriptors';

export const geometry = referenceGeometries['qwen3-0.6b'];
/** The groups a worker reads, at their defaults. */
export const settings = defineSettings([
  transportGroup,
  discoveryGroup,
  drainGroup,
  endpointGroup,
  inventoryGroup,
]).defaults;
/** Blocks per bank (each bank is one layer's K or V): the slots of the worker's KV cache. */
const slots = 8;

/** The token ids of a conversation `blocks` blocks long, the same at every run. */
export function conversation(blocks) {
  return Array.from({ length: blocks * geometry.blockTokens }, (_, i) => (i * 7919 + 17) % 151_936);
}

/** The block-hash chain of a prompt, salted for this model exactly as every worker and router salts it. */
export function blockHashes(tokens) {
  return hashBlockChain(tokens, blockHashScheme(geometry, settings.inventory.hashSeed));
}

/** Stands in for the model: the KV bytes of the block `hash` in bank `bank` (xorshift32, seeded by both). */
function kvContent(hash, bank, bytes) {
  let state = Number(BigInt.asUintN(32, hash ^ (hash >> 32n)) ^ BigInt(bank * 0x9e3779b9)) >>> 0 || 1;
  const words = new Uint32Array(bytes / 4);
  for (let i = 0; i < words.length; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    words[i] = state >>> 0;
  }
  return new Uint8Array(words.buffer);
}

/**
 * Opens the worker's one rank: its agent (`backend`: 'loopback' within a process, 'ucx' across them) and
 * its endpoint, which lays out, allocates and registers its banks and publishes its rank part; and its
 * block pool, which stands in for the framework's block table (its slots are the banks' blocks); a
 * decode worker `serve`s pins on it. `secret` is the cluster secret (`openClusterSecret`) its metadata
 * is signed and its peers' checked with.
 */
export async function openWorker({ workerId, role, backend, discovery, secret, serve = false }) {
  const agent = await loadTransport().createAgent({ name: `${workerId}-tp0-${process.pid}`, backend });
  const pool = new BlockPool(slots);
  const endpoint = await ReuseEndpoint.open({
    agent,
    discovery,
    secret,
    // A new incarnation per process start: nothing an earlier start published is trusted for this one.
    worker: { workerId, incarnation: randomUUID(), role, geometry, tpSize: 1, ppSize: 1, dpRank: 0 },
    rank: { tpRank: 0, ppRank: 0 },
    blocks: slots, // kvreuse allocates the banks and owns them: draining hands each back by freeing it
    settings,
    ...(serve ? { serve: { adapter: pool } } : {}),
  });
  // The banks' bytes, every one allocated by open(): what the source checksums for its readers, and what the reader verifies.
  const views = /** @type {Uint8Array[]} */ (endpoint.bankBytes);
  return { workerId, endpoint, pool, views, blockBytes: views[0].length / slots };
}

/** @typedef {Awaited<ReturnType<typeof openWorker>>} Worker */

/**
 * Resolves once discovery calls the worker ready, with its readiness (the incarnation and the epoch
 * discovery gave it).
 * @param {Worker} worker
 */
export async function whenReady(worker) {
  const { readiness } = await worker.endpoint.whenReady();
  return readiness;
}

/**
 * Decode: computes each block of `hashes` into a free slot and retains it in the pool.
 * @param {Worker} worker
 * @param {BigUint64Array} hashes
 */
export function retain(worker, hashes) {
  for (const hash of hashes) {
    const slot = worker.pool.allocate();
    worker.views.forEach((view, bank) => view.set(kvContent(hash, bank, worker.blockBytes), slot * worker.blockBytes));
    worker.pool.commit(slot, hash);
  }
}

/**
 * Whether block `slot` of the worker's banks holds exactly the KV content of block `hash`.
 * @param {Worker} worker
 * @param {number} slot
 * @param {bigint} hash
 */
function holdsKvContent(worker, slot, hash) {
  const start = slot * worker.blockBytes;
  return worker.views.every(
    (view, bank) =>
      Buffer.compare(view.subarray(start, start + worker.blockBytes), kvContent(hash, bank, worker.blockBytes)) === 0,
  );
}

/**
 * The hint the router's `decide` (@kvreuse/router) gives a prefill worker: pull the first
 * `hashes.length` blocks of the prompt from this source incarnation, from host memory.
 * @param {{ workerId: string, incarnation: string, epoch: number }} source
 * @param {BigUint64Array} hashes
 * @param {'same-host' | 'network'} linkClass
 * @returns {import('@kvreuse/endpoint').PullRequest['hint']}
 */
export function pullHint(source, hashes, linkClass) {
  const { workerId, incarnation, epoch } = source;
  return {
    workerId,
    incarnation,
    epoch,
    blocks: { start: 0, count: hashes.length },
    hashes,
    blockTokens: geometry.blockTokens,
    tier: 'host',
    linkClass,
  };
}

/**
 * Prefill: pulls the hinted prefix into free slots (the endpoint pins it at the source, reads it, checks
 * every block's CRC-32 against the source's and releases the pin) and commits the verified blocks to its
 * pool; a framework would recompute the rest. Also checks each committed block byte for byte against
 * the KV content: returns the receipt and how many matched.
 * @param {Worker} worker
 * @param {import('@kvreuse/endpoint').PullRequest['hint']} hint
 */
export async function pull(worker, hint) {
  const slots = Uint32Array.from(hint.hashes, () => worker.pool.allocate());
  const receipt = await worker.endpoint.pull({ hint, destinationBlocks: slots, verify: 'full', policy: 'recompute' });
  let matching = 0;
  for (let block = 0; block < receipt.blocks; block++) {
    if (holdsKvContent(worker, slots[block], hint.hashes[block])) matching++;
    worker.pool.commit(slots[block], hint.hashes[block]);
  }
  return { receipt, matching };
}

/** @param {Awaited<ReturnType<typeof pull>>} pulled */
export function describePull({ receipt, matching }) {
  const reasons = receipt.recomputed.reasons.map((reason) => `${reason.kind} at block ${reason.fromBlock}`);
  return [
    `pulled ${receipt.blocks} of ${receipt.requested} blocks (${receipt.bytes.toLocaleString('en-US')} bytes) in ${receipt.ms.toFixed(1)} ms, ${receipt.checkedBlocks} checksums verified`,
    `${matching} of ${receipt.blocks} blocks hold exactly the decode worker's KV content`,
    `recompute ${receipt.recomputed.blocks} blocks${reasons.length === 0 ? '' : `: ${reasons.join(', ')}`}`,
  ].join('\n  ');
}

/**
 * Drains the worker (source side first: withdrawn from discovery, readers' pins waited for, banks handed back), then closes its agent.
 * @param {Worker} worker
 */
export async function stop(worker) {
  const report = await worker.endpoint.drain({ deadlineMs: 10_000 });
  const closed = await worker.endpoint.close();
  return `${worker.workerId} drained: ${report.banksReturned.length} banks handed back, ${report.banksRetained.length} retained, ${report.pins.length} pins waited for; agent ${closed.agentDestroyed ? 'closed' : 'KEPT'}`;
}
