import { describe, expect, it } from 'vitest';
import { allGroups, kvreuseSettings, settingDescriptions } from './all-settings.js';

const settingGroups = kvreuseSettings.describe();
const describeSetting = kvreuseSettings.describeSetting;

describe('settingDescriptions', () => {
  it('holds the groups in catalog order, with the router settings the issue lists', () => {
    expect(settingGroups.map((group) => group.name)).toEqual(allGroups.map((group) => group.name));
    const router = settingDescriptions
      .filter((setting) => setting.group === 'router')
      .map(({ key, type, default: value }) => [key, type, value]);
    expect(router).toEqual([
      ['enable_decode_to_prefill_reuse', 'true | false', false],
      ['enable_decode_to_prefill_gpu_reuse', 'true | false', false],
      ['minimum_estimated_ttft_saving_ms', 'number ≥ 0', 5],
      ['minimum_transfer_prefix_blocks', 'integer ≥ 1', 4],
      ['transfer_source_estimated_block_us', 'number > 0', 100],
      ['transfer_source_gpu_estimated_block_us', 'number > 0', 40],
      ['transfer_source_lookup_budget_ms', 'number ≥ 0', 2],
      ['transfer_source_prefill_token_us', 'number > 0', 50],
      ['max_concurrent_pulls_per_source', 'integer ≥ 1', 4],
    ]);
  });

  it('derives the file key, flag and variable from one declaration', () => {
    expect(describeSetting('router.minimumTransferPrefixBlocks')).toMatchObject({
      group: 'router',
      name: 'minimumTransferPrefixBlocks',
      key: 'minimum_transfer_prefix_blocks',
      fileKey: 'router.minimum_transfer_prefix_blocks',
      flag: '--router-minimum-transfer-prefix-blocks',
      env: 'KVREUSE_ROUTER_MINIMUM_TRANSFER_PREFIX_BLOCKS',
      unit: 'blocks',
    });
    expect(describeSetting('frontend.rejectMediaStatusCode')).toMatchObject({
      flag: '--frontend-reject-media-status-code',
      env: 'KVREUSE_FRONTEND_REJECT_MEDIA_STATUS_CODE',
      type: 'integer 400–599',
      default: 415,
    });
  });

  it('gives every setting distinct names in every source and the naming shape the docs promise', () => {
    for (const field of ['path', 'fileKey', 'flag', 'env'] as const) {
      expect(new Set(settingDescriptions.map((setting) => setting[field])).size).toBe(settingDescriptions.length);
    }
    for (const setting of settingDescriptions) {
      expect(setting.fileKey).toMatch(/^[a-z]+\.[a-z0-9]+(_[a-z0-9]+)*$/);
      expect(setting.flag).toMatch(/^--[a-z]+(-[a-z0-9]+)+$/);
      expect(setting.env).toMatch(/^KVREUSE_[A-Z]+(_[A-Z0-9]+)+$/);
      expect(setting.description.length).toBeGreaterThan(20);
    }
    for (const group of settingGroups) expect(group.name).toMatch(/^[a-z]+$/);
  });

  it('declares defaults that pass their own schemas', () => {
    for (const setting of settingDescriptions) {
      expect(setting.schema.safeParse(setting.default).success, setting.path).toBe(true);
    }
  });

  it('has the choices and rules picked for transport, discovery and drain', () => {
    expect(describeSetting('transport.backend')).toMatchObject({ type: 'one of ucx | loopback', default: 'ucx' });
    expect(describeSetting('transport.shutdownDeadlineMs')).toMatchObject({
      type: 'integer > 0',
      default: 10_000,
      unit: 'ms',
    });
    expect(describeSetting('discovery.backend')).toMatchObject({
      type: 'one of memory | sqlite | etcd',
      default: 'sqlite',
    });
    expect(describeSetting('discovery.leaseTtlMs').type).toBe('integer 1000–9000000000000, a multiple of 1000');
    expect(describeSetting('discovery.etcdEndpoints')).toMatchObject({
      type: 'list (at least 1) of http://host:port or https://host:port',
      default: ['http://127.0.0.1:2379'],
    });
    expect(describeSetting('drain.failedLoadPolicy')).toMatchObject({
      type: 'one of fail | recompute',
      default: 'recompute',
    });
    expect(describeSetting('inventory.hashSeed')).toMatchObject({
      flag: '--inventory-hash-seed',
      env: 'KVREUSE_INVENTORY_HASH_SEED',
      type: 'up to 128 printable ASCII characters',
      default: '',
    });
    expect(describeSetting('profile.name')).toMatchObject({
      flag: '--profile-name',
      env: 'KVREUSE_PROFILE_NAME',
      type: 'a profile name, or empty',
      default: '',
    });
    expect(describeSetting('profile.file')).toMatchObject({
      flag: '--profile-file',
      env: 'KVREUSE_PROFILE_FILE',
      type: 'string',
      default: '',
    });
  });
});
