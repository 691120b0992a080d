import { UnknownSettingError } from '@kvreuse/config';
import { describe, expect, it } from 'vitest';
import { runMainJob } from './main-job.js';

// A clock that stands still: the router's lookup budget never runs out, whatever the machine's load.
const clock = () => 0;

describe('the main job', () => {
  it('reports both example workers complete and compatible, and plans the 42-block prefix', () => {
    const report = runMainJob({ clock });
    expect(report).toContain(
      'decode worker: complete — qwen3-0.6b-decode-0 (decode), TP=2 PP=1, 2 rank parts, 112 banks',
    );
    expect(report).toContain(
      'prefill worker: complete — qwen3-0.6b-prefill-0 (prefill), TP=1 PP=1, 1 rank parts, 56 banks',
    );
    expect(report).toContain('tp1/pp0 → tp0/pp0: KV heads 4..7, layers 0..27');
    // The router decides with the example settings: 42 × 64 tokens × 50 µs saves 134.4 ms; 42 host blocks
    // × 100 µs + the 2 ms lookup budget cost 6.2 ms.
    expect(report).toContain(
      'pull (worth-it): pull 42 blocks from qwen3-0.6b-decode-0: saves 134.4 ms for 6.2 ms (prior estimate), net 128.2 ms',
    );
    expect(report).toContain('== plan: pull blocks 0..41 (42 blocks)');
    expect(report).toContain('total: 4704 descriptors, 308,281,344 bytes');
  });

  it('recomputes, saying why, when the settings make the pull not worth it', () => {
    const report = runMainJob({ argv: ['--router-minimum-estimated-ttft-saving-ms', '200'], clock });
    expect(report).toContain(
      'recompute (not-worth-it): the best source, qwen3-0.6b-decode-0: saves 134.4 ms for 6.2 ms (prior estimate), net 128.2 ms; router.minimum_estimated_ttft_saving_ms = 200',
    );
    expect(report).not.toContain('total:');
  });

  it('takes settings from the environment it is given, over the example file', () => {
    const report = runMainJob({ env: { KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_REUSE: 'false' }, clock });
    expect(report).toMatch(
      /router\.enable_decode_to_prefill_reuse\s+false\s+env KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_REUSE/,
    );
    expect(report).toContain('recompute (disabled): router.enable_decode_to_prefill_reuse is off');
    expect(report).not.toContain('total:');
  });

  it('recomputes when finding a source runs over the lookup budget', () => {
    let now = 0;
    const report = runMainJob({ clock: () => (now += 3) }); // every reading 3 ms later: past the 2 ms budget
    expect(report).toContain(
      'recompute (budget-exceeded): finding a source took longer than router.transfer_source_lookup_budget_ms = 2 ms',
    );
    expect(report).not.toContain('total:');
  });

  it('refuses an unknown setting before doing anything', () => {
    expect(() => runMainJob({ argv: ['--router-minimum-transfer-prefix-block', '8'] })).toThrow(UnknownSettingError);
  });
});
