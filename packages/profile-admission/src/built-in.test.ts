import { readdirSync, readFileSync } from 'node:fs';
import { bytesPerElement, deriveShard, geometryDigest, rankBlockBytes } from '@kvreuse/descriptors';
import { blockHashFunction } from '@kvreuse/inventory';
import { composed } from '../test/support.js';
import { describe, expect, it } from 'vitest';
import { builtInProfile, builtInProfileNames, builtInProfiles } from './built-in.js';

const profilesFolder = new URL('../profiles/', import.meta.url);

describe('built-in profiles', () => {
  it('ships one JSON file per listed name, named after the profile, in the published files', () => {
    expect(readdirSync(profilesFolder).sort()).toEqual(builtInProfileNames.map((name) => `${name}.json`).sort());
    expect(builtInProfiles({ settings: composed }).map((profile) => profile.name)).toEqual([...builtInProfileNames]);
    const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      files: string[];
    };
    expect(manifest.files).toContain('profiles');
  });

  it('state the real model dimensions, digested by the descriptors geometry digest', () => {
    const dims = builtInProfiles({ settings: composed }).map(
      ({ name, modelId, geometry: g, geometryDigest: digest }) => {
        expect(digest).toBe(geometryDigest(g));
        return `${name} ${modelId}: ${g.numLayers} layers × ${g.kvPlanes} planes, ${g.numKvHeads} KV heads × ${g.headDim}, ${g.dtype}, ${g.blockTokens}-token blocks, ${g.bankLayout} ${g.headOrder}`;
      },
    );
    expect(dims).toEqual([
      'qwen3-0.6b-bf16-b64 Qwen/Qwen3-0.6B: 28 layers × 2 planes, 8 KV heads × 128, bf16, 64-token blocks, layer-separate HND',
      'llama-3.1-8b-bf16-b16 meta-llama/Llama-3.1-8B-Instruct: 32 layers × 2 planes, 8 KV heads × 128, bf16, 16-token blocks, layer-separate HND',
      'llama-3.1-8b-bf16-b64 meta-llama/Llama-3.1-8B-Instruct: 32 layers × 2 planes, 8 KV heads × 128, bf16, 64-token blocks, layer-separate HND',
      'llama-3.1-70b-bf16-b64 meta-llama/Llama-3.1-70B-Instruct: 80 layers × 2 planes, 8 KV heads × 128, bf16, 64-token blocks, layer-separate HND',
      // MLA: one latent plane per token of kv_lora_rank 512 + qk_rope_head_dim 64, as one "head".
      'deepseek-v2-lite-mla-b64 deepseek-ai/DeepSeek-V2-Lite: 27 layers × 1 planes, 1 KV heads × 576, bf16, 64-token blocks, layer-separate HND',
    ]);
  });

  it('hold the reference byte figures: a Qwen3-0.6B block is 7,340,032 bytes, a DeepSeek-V2-Lite block 1,990,656', () => {
    const whole = { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 };
    const qwen = builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed }).geometry;
    expect(rankBlockBytes(qwen, deriveShard(qwen, whole))).toBe(7_340_032);
    const mla = builtInProfile('deepseek-v2-lite-mla-b64', { settings: composed }).geometry;
    expect(rankBlockBytes(mla, deriveShard(mla, whole))).toBe(27 * 64 * 576 * bytesPerElement('bf16'));
    expect(27 * 64 * 576 * 2).toBe(1_990_656);
  });

  it('declare the roles, memory and capabilities of each deployment', () => {
    const shapes = builtInProfiles({ settings: composed }).map(
      ({ name, roles, nativeCapabilities, transport, blockHash }) => {
        expect(blockHash.function).toBe(blockHashFunction);
        const role = (which: 'decode' | 'prefill') =>
          `${which} TP ${roles[which]!.tpSize} PP ${roles[which]!.ppSize} ${roles[which]!.memoryKinds.join('+')}`;
        return `${name}: ${role('decode')} → ${role('prefill')}; ${transport.backend}; needs ${nativeCapabilities.join(', ')}`;
      },
    );
    expect(shapes).toEqual([
      'qwen3-0.6b-bf16-b64: decode TP 2 PP 1 dram+vram → prefill TP 1 PP 1 dram+vram; ucx; needs ucx',
      'llama-3.1-8b-bf16-b16: decode TP 1 PP 1 dram+vram → prefill TP 1 PP 1 dram+vram; ucx; needs ucx',
      'llama-3.1-8b-bf16-b64: decode TP 1 PP 1 dram+vram → prefill TP 1 PP 1 dram+vram; ucx; needs ucx',
      'llama-3.1-70b-bf16-b64: decode TP 8 PP 1 vram → prefill TP 4 PP 1 vram; ucx; needs ucx, vram',
      'deepseek-v2-lite-mla-b64: decode TP 2 PP 1 dram → prefill TP 1 PP 1 dram; ucx; needs ucx',
    ]);
  });

  it('returns the same frozen profile each time, and refuses a name it does not ship', () => {
    expect(builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed })).toBe(
      builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed }),
    );
    expect(Object.isFrozen(builtInProfile('llama-3.1-70b-bf16-b64', { settings: composed }).geometry)).toBe(true);
    expect(() => builtInProfile('qwen3-8b' as never, { settings: composed })).toThrow(
      expect.objectContaining({
        code: 'UNKNOWN_PROFILE',
        profileName: 'qwen3-8b',
        message: expect.stringMatching(
          /^no built-in deployment profile is named "qwen3-8b" \(did you mean qwen3-0\.6b-bf16-b64\?\); the built-in profiles are qwen3-0\.6b-bf16-b64, /,
        ),
      }),
    );
  });

  it('refuses options without the settings composition with a typed error naming it', () => {
    for (const [options, argument] of [
      [undefined, 'options'],
      [{}, 'options.settings'],
    ] as const) {
      expect(() => builtInProfile('qwen3-0.6b-bf16-b64', options as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument }),
      );
    }
  });
});
