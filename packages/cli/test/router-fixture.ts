// All router settings with non-default values, written out by hand in every source's syntax.
import type { Settings } from '../src/settings/all-settings.js';

export const routerFixture: Settings['router'] = {
  enableDecodeToPrefillReuse: true,
  enableDecodeToPrefillGpuReuse: true,
  minimumEstimatedTtftSavingMs: 12.5,
  minimumTransferPrefixBlocks: 16,
  transferSourceEstimatedBlockUs: 180,
  transferSourceGpuEstimatedBlockUs: 35.5,
  transferSourceLookupBudgetMs: 0.75,
  transferSourcePrefillTokenUs: 62,
  maxConcurrentPullsPerSource: 3,
};

export const routerFixtureYaml = `router:
  enable_decode_to_prefill_reuse: true
  enable_decode_to_prefill_gpu_reuse: true
  minimum_estimated_ttft_saving_ms: 12.5
  minimum_transfer_prefix_blocks: 16
  transfer_source_estimated_block_us: 180
  transfer_source_gpu_estimated_block_us: 35.5
  transfer_source_lookup_budget_ms: 0.75
  transfer_source_prefill_token_us: 62
  max_concurrent_pulls_per_source: 3
`;

export const routerFixtureJson = `{
  "router": {
    "enable_decode_to_prefill_reuse": true,
    "enable_decode_to_prefill_gpu_reuse": true,
    "minimum_estimated_ttft_saving_ms": 12.5,
    "minimum_transfer_prefix_blocks": 16,
    "transfer_source_estimated_block_us": 180,
    "transfer_source_gpu_estimated_block_us": 35.5,
    "transfer_source_lookup_budget_ms": 0.75,
    "transfer_source_prefill_token_us": 62,
    "max_concurrent_pulls_per_source": 3
  }
}
`;

export const routerFixtureEnv: Readonly<Record<string, string>> = {
  KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_REUSE: 'true',
  KVREUSE_ROUTER_ENABLE_DECODE_TO_PREFILL_GPU_REUSE: '1',
  KVREUSE_ROUTER_MINIMUM_ESTIMATED_TTFT_SAVING_MS: '12.5',
  KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS: '16',
  KVREUSE_ROUTER_TRANSFER_SOURCE_ESTIMATED_BLOCK_US: '180',
  KVREUSE_ROUTER_TRANSFER_SOURCE_GPU_ESTIMATED_BLOCK_US: '35.5',
  KVREUSE_ROUTER_TRANSFER_SOURCE_LOOKUP_BUDGET_MS: '0.75',
  KVREUSE_ROUTER_TRANSFER_SOURCE_PREFILL_TOKEN_US: '62',
  KVREUSE_ROUTER_MAX_CONCURRENT_PULLS_PER_SOURCE: '3',
};

export const routerFixtureArgv: readonly string[] = [
  '--router-enable-decode-to-prefill-reuse',
  '--router-enable-decode-to-prefill-gpu-reuse=true',
  '--router-minimum-estimated-ttft-saving-ms',
  '12.5',
  '--router-minimum-transfer-prefix-blocks=16',
  '--router-transfer-source-estimated-block-us',
  '180',
  '--router-transfer-source-gpu-estimated-block-us=35.5',
  '--router-transfer-source-lookup-budget-ms',
  '0.75',
  '--router-transfer-source-prefill-token-us=62',
  '--router-max-concurrent-pulls-per-source',
  '3',
];
