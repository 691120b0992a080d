import { calibrationSample } from '@kvreuse/endpoint';
import { holdsBlockContent, writeBlockContent } from './kv-content.js';
export function describeReason(reason) {
    const from = `from block ${reason.fromBlock}`;
    switch (reason.kind) {
        case 'pin-granted-fewer':
            return `${from}: source rank tp${reason.sourceRank.tpRank} pinned only ${reason.granted} blocks`;
        case 'pin-refused':
            return `${from}: source rank tp${reason.sourceRank.tpRank} gave no pin (${reason.reason}): ${reason.detail}`;
        case 'pin-lost':
            return `${from}: pin lost (${reason.reason}): ${reason.detail}`;
        case 'operation-failed':
            return `${from}: the read of rank pair ${reason.pair} failed (${reason.code}): ${reason.detail}`;
        case 'checksum-mismatch':
            return `${from}: checksum mismatch on rank pair ${reason.pair}`;
    }
}
/** Zeroes blocks `0 … count − 1` of every bank: what is there after the pull must be the pull's. */
function clearBlocks(part, views, count) {
    part.banks.forEach((bank, index) => views[index].fill(0, 0, count * Number(bank.blockStride)));
}
export async function pullPrefix(options) {
    const { rank, hint, prediction, beforeRelease } = options;
    const part = rank.part;
    const hashes = Array.from(hint.hashes);
    // The prefix goes to this rank's blocks 0 … count − 1.
    const destinationBlocks = Uint32Array.from(hashes, (_, slot) => slot);
    clearBlocks(part, rank.views, hashes.length);
    const receipt = await rank.endpoint.fetch({
        hint,
        destinationBlocks,
        policy: 'recompute',
        ...(prediction === undefined ? {} : { prediction: { ...prediction, blockTokens: hint.blockTokens } }),
        ...(beforeRelease === undefined ? {} : { beforeRelease }),
    });
    const calibration = calibrationSample(receipt);
    let verified = true;
    for (let slot = 0; slot < receipt.blocks; slot++)
        verified &&= holdsBlockContent(part, rank.views, slot, hashes[slot]);
    // Recompute: the prefill computes what it could not take (and keeps nothing unverified of the pull).
    for (let slot = receipt.blocks; slot < hashes.length; slot++)
        writeBlockContent(part, rank.views, slot, hashes[slot]);
    return {
        requested: receipt.requested,
        blocks: receipt.blocks,
        bytes: receipt.bytes,
        verified,
        verify: receipt.verify,
        checkedBlocks: receipt.checkedBlocks,
        ms: receipt.ms,
        gbps: receipt.gbps * 8,
        recomputed: { blocks: receipt.recomputed.blocks, reasons: receipt.recomputed.reasons.map(describeReason) },
        ...(receipt.saving === undefined ? {} : { saving: receipt.saving }),
        ...(calibration === undefined ? {} : { calibration }),
    };
}
