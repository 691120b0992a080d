export function pullSummary(report) {
    return {
        blocks: report.blocks,
        bytes: report.bytes,
        verified: report.verified,
        verify: report.verify,
        checkedBlocks: report.checkedBlocks,
        ms: report.ms,
        gbps: report.gbps,
        recomputedBlocks: report.recomputed.blocks,
        savingMs: { predicted: report.saving?.predictedMs ?? 0, measured: report.saving?.measuredMs ?? 0 },
    };
}
export function drainRow(drain) {
    return {
        process: drain.process,
        exitCode: drain.exitCode,
        signal: drain.signal,
        banksReturned: drain.drain?.banksReturned ?? null,
        banksRetained: drain.drain?.banksRetained ?? null,
        pins: drain.drain?.pins ?? null,
    };
}
/** The last line without `--json`. */
export function summaryLine(summary) {
    const { pull, killedRank } = summary;
    const drained = summary.drain.filter((row) => row.banksReturned !== null);
    const returned = drained.reduce((sum, row) => sum + (row.banksReturned ?? 0), 0);
    const retained = drained.reduce((sum, row) => sum + (row.banksRetained ?? 0), 0);
    const waited = drained.reduce((sum, row) => sum + (row.pins?.waitedFor ?? 0), 0);
    const released = drained.reduce((sum, row) => sum + (row.pins?.released ?? 0), 0);
    const pulled = pull === null
        ? 'no pull'
        : `pulled ${pull.blocks} blocks (${pull.bytes.toLocaleString('en-US')} bytes, ${pull.verified ? 'verified' : 'NOT verified'}) in ${pull.ms.toFixed(1)} ms at ${pull.gbps.toFixed(2)} Gbit/s`;
    const killed = killedRank === null ? '' : `killed rank: ${killedRank.recomputed} blocks recomputed, ${killedRank.committedBlocks} committed; `;
    const { calibration } = summary;
    const calibrated = calibration === null
        ? ''
        : `transfer estimate ${calibration.transferMs.prior.toFixed(1)} ms (prior) → ${calibration.transferMs.calibrated.toFixed(1)} ms (calibrated, measured ${calibration.transferMs.measured.toFixed(1)} ms); `;
    return (`kvreuse demo: ${pulled}; ${summary.decisions.map((d) => `${d.request} ${d.action} (${d.reason})`).join(', ')}; ` +
        `${calibrated}gpu reuse ${summary.gpu.active ? 'active' : 'refused'}; ${killed}${drained.length} processes drained, ${returned} banks returned, ${retained} retained, ` +
        `${waited} pin${waited === 1 ? '' : 's'} waited for (${released} released)`);
}
