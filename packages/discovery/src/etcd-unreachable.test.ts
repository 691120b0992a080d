import { createServer } from 'node:net';
import { expect, it } from 'vitest';
import { connectEtcdDiscovery } from './etcd.js';
import { DiscoveryUnavailableError } from './errors.js';

/** A port on 127.0.0.1 that was free a moment ago and that nothing listens on now: connections to it are refused. */
async function refusingPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

it('no etcd answering at the endpoints: DiscoveryUnavailableError says so in words, the raw failure kept as its cause', async () => {
  const endpoint = `http://127.0.0.1:${await refusingPort()}`;
  const store = connectEtcdDiscovery({ hosts: [endpoint], requestTimeoutMs: 2_000 });
  try {
    const error = await store.get('/workers/a').then(
      () => undefined,
      (refused: unknown) => refused,
    );
    expect(error).toBeInstanceOf(DiscoveryUnavailableError);
    expect((error as Error).message).toBe(
      `etcd discovery: get of key "/workers/a" failed: no etcd answered at ${endpoint} (connection refused)`,
    );
    expect((error as Error).cause).toMatchObject({ message: expect.stringMatching(/^14 UNAVAILABLE: .*ECONNREFUSED/) });
  } finally {
    await store.close();
  }
});

it('a list or watch that no etcd answers names what it was given as a prefix', async () => {
  const endpoint = `http://127.0.0.1:${await refusingPort()}`;
  const store = connectEtcdDiscovery({ hosts: [endpoint], requestTimeoutMs: 2_000 });
  try {
    const unanswered = `failed: no etcd answered at ${endpoint} (connection refused)`;
    await expect(store.list('/workers/')).rejects.toThrow(`etcd discovery: list of prefix "/workers/" ${unanswered}`);
    await expect(store.watch('/workers/', () => {})).rejects.toThrow(
      `etcd discovery: watch of prefix "/workers/" ${unanswered}`,
    );
  } finally {
    await store.close();
  }
});
