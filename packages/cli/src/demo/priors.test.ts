import { exampleSettingsPath } from '../settings/example.js';
import { kvreuseSettings } from '../settings/all-settings.js';
import { describe, expect, it } from 'vitest';
import { demoPriors, prefillFlopsPerToken, prefillTokenUsOn, priorLines, withPriors } from './priors.js';

const { settings } = kvreuseSettings.resolve({ file: exampleSettingsPath, env: {}, argv: [] });
const handOff = { blocks: 40, ms: 200 };
const compute = { cores: 2, mhz: 2600 };
const measure = { blockUs: false, prefillTokenUs: false };

describe("the main job's priors", () => {
  it("Qwen3-0.6B's weights cost 880,803,840 FLOPs a token; at 2 cores × 2,600 MHz × 128 FLOPs a cycle, 1,323.3 µs at least", () => {
    // 28 layers × 2 × (q 1024×2048 + k, v 1024×1024 each + o 2048×1024 + MLP 3 × 1024×3072).
    expect(prefillFlopsPerToken).toBe(880_803_840);
    expect(prefillTokenUsOn(compute)).toBeCloseTo(1323.323, 3);
  });

  it("the link's from the hand-off's time a block, the recompute's derived from the compute; the router's settings take them", () => {
    const priors = demoPriors(settings, measure, handOff, compute);
    expect(priors.blockUs).toMatchObject({ value: 5000, source: 'measured' });
    expect(priors.prefillTokenUs).toMatchObject({ value: prefillTokenUsOn(compute), source: 'derived' });
    expect(withPriors(settings, priors).router).toMatchObject({
      transferSourceEstimatedBlockUs: 5000,
      transferSourcePrefillTokenUs: prefillTokenUsOn(compute),
    });
    expect(priorLines(priors)).toEqual([
      "priors: a block over the link 5,000 µs (measured: turn 1's hand-off WRITEs over this link: 40 blocks in 200.0 ms, one block at a time)",
      "  recomputing a token 1,323 µs (derived: Qwen3-0.6B's 880,803,840 FLOPs a token at this machine's peak: 2 cores × 2600 MHz × 128 bf16 FLOPs a cycle)",
    ]);
  });

  it('keeps the priors the settings give, and the settings prior when the machine reports no clock', () => {
    const given = demoPriors(settings, { blockUs: true, prefillTokenUs: true }, handOff, compute);
    expect(given).toEqual({
      blockUs: { value: 100, source: 'settings', detail: 'router.transfer_source_estimated_block_us' },
      prefillTokenUs: { value: 50, source: 'settings', detail: 'router.transfer_source_prefill_token_us' },
    });
    expect(demoPriors(settings, measure, handOff, undefined).prefillTokenUs).toEqual({
      value: 50,
      source: 'settings',
      detail: 'router.transfer_source_prefill_token_us: this machine reports no clock to derive it from',
    });
  });
});
