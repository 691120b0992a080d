import { UnknownSettingError } from '@kvreuse/config';
import { describe, expect, it } from 'vitest';
import { runMainJob } from './main-job.js';

describe('the main job', () => {
  it('reports both example workers complete and compatible, and plans the 42-block prefix', () => {
    const report = runMainJob();
    expect(report).toContain('decode worker: complete — qwen3-0.6b-decode-0 (decode), TP=2 PP=1, 2 rank parts, 112 banks');
    expect(report).toContain('prefill worker: complete — qwen3-0.6b-prefill-0 (prefill), TP=1 PP=1, 1 rank parts, 56 banks');
    expect(report).toContain('tp1/pp0 → tp0/pp0: KV heads 4..7, layers 0..27');
    expect(report).toContain('total: 4704 descriptors, 308,281,344 bytes');
  });

  it('takes settings from the environment it is given, over the example file', () => {
    const report = runMainJob({ env: { KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_REUSE: 'false' } });
    expect(report).toMatch(/router\.enable_decode_to_prefill_reuse\s+false\s+env KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_REUSE/);
    expect(report).toContain('reuse is off');
    expect(report).not.toContain('total:');
  });

  it('refuses an unknown setting before doing anything', () => {
    expect(() => runMainJob({ argv: ['--router-minimum-transfer-prefix-block', '8'] })).toThrow(UnknownSettingError);
  });
});
