import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineSettings } from '@kvreuse/config';
import { discoveryGroup } from './settings.js';
import { afterAll, describe, expect, it } from 'vitest';
import { DiscoverySettingsError } from './errors.js';
import { EtcdDiscoveryStore } from './etcd.js';
import { MemoryDiscoveryStore } from './memory.js';
import { openDiscovery } from './open.js';
import { SqliteDiscoveryStore } from './sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-open-discovery-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const discoveryFrom = (argv: string[]) => defineSettings([discoveryGroup]).resolve({ argv }).settings.discovery;

describe('openDiscovery', () => {
  it('opens the store the resolved discovery settings name', async () => {
    const memory = openDiscovery(discoveryFrom(['--discovery-backend', 'memory']));
    expect(memory).toBeInstanceOf(MemoryDiscoveryStore);
    await memory.close();

    const path = join(dir, 'shared.sqlite');
    const writer = openDiscovery(discoveryFrom(['--discovery-backend', 'sqlite', '--discovery-sqlite-path', path]));
    const reader = openDiscovery(discoveryFrom(['--discovery-backend', 'sqlite', '--discovery-sqlite-path', path]));
    expect(writer).toBeInstanceOf(SqliteDiscoveryStore);
    await writer.put('kvreuse/probe', 'written through one connection');
    expect((await reader.get('kvreuse/probe'))?.value).toEqual(
      new TextEncoder().encode('written through one connection'),
    );
    await writer.close();
    await reader.close();

    // Connecting is lazy: the client exists before any request reaches the endpoint.
    const etcd = openDiscovery(
      discoveryFrom(['--discovery-backend', 'etcd', '--discovery-etcd-endpoints', 'http://127.0.0.1:1']),
    );
    expect(etcd).toBeInstanceOf(EtcdDiscoveryStore);
    await etcd.close();
  });

  it("reads a secured etcd's files from the settings: a missing one is refused, naming its setting and its path", () => {
    const missing = join(dir, 'missing-ca.pem');
    const secured = [
      '--discovery-backend',
      'etcd',
      '--discovery-etcd-endpoints',
      'https://127.0.0.1:1',
      '--discovery-etcd-ca-file',
      missing,
    ];
    expect(() => openDiscovery(discoveryFrom(secured))).toThrow(
      expect.objectContaining({
        code: 'DISCOVERY_CREDENTIALS_FILE_UNREADABLE',
        option: 'discovery.etcd_ca_file',
        path: missing,
      }),
    );
    expect(() => openDiscovery(discoveryFrom(secured))).toThrow(
      `etcd discovery: discovery.etcd_ca_file "${missing}" cannot be used: ENOENT`,
    );
    const password = join(dir, 'missing-password');
    const user = [
      '--discovery-backend',
      'etcd',
      '--discovery-etcd-username',
      'decode-0',
      '--discovery-etcd-password-file',
      password,
    ];
    expect(() => openDiscovery(discoveryFrom(user))).toThrow(
      expect.objectContaining({ option: 'discovery.etcd_password_file', path: password }),
    );
    // Settings resolution refuses this pair too; a caller handing openDiscovery its own object meets it here.
    const withoutPassword = {
      backend: 'etcd',
      sqlitePath: '',
      etcdEndpoints: ['http://127.0.0.1:1'],
      etcdUsername: 'decode-0',
    } as const;
    expect(() => openDiscovery(withoutPassword)).toThrow(
      expect.objectContaining({
        code: 'DISCOVERY_INVALID_SETTINGS',
        setting: 'discovery.etcd_password_file',
        message: expect.stringMatching(/^discovery settings: discovery.etcd_password_file = "" is refused/),
      }),
    );
  });

  it('refuses settings that name no store, naming the setting and its value', () => {
    const bad = { backend: 'zookeeper', sqlitePath: 'x', etcdEndpoints: [] } as never;
    expect(() => openDiscovery(bad)).toThrow(DiscoverySettingsError);
    expect(() => openDiscovery(bad)).toThrow(/discovery\.backend = "zookeeper"/);
  });
});
