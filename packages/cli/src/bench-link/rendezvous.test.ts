import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { codeOf } from '@kvreuse/errors';
import {
  acceptMessage,
  connectToListener,
  doneMessage,
  helloMessage,
  type LineChannel,
  LinkListener,
} from './rendezvous.js';

const opened: { close(): void }[] = [];
afterEach(() => {
  for (const thing of opened.splice(0)) thing.close();
});

/** A server on 127.0.0.1 that does `serve` with each connection; resolves with its port. */
async function peerThat(serve: (socket: Socket) => void): Promise<number> {
  const server: Server = createServer(serve);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  opened.push({ close: () => server.close() });
  return (server.address() as { port: number }).port;
}

async function channelTo(port: number): Promise<LineChannel> {
  const channel = await connectToListener('127.0.0.1', port, 5_000);
  opened.push(channel);
  return channel;
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('it did not fail');
}

describe('the exchange', () => {
  it('the listener answers the hello with its metadata; the done line ends it', async () => {
    const listener = await LinkListener.open('127.0.0.1', 0);
    opened.push(listener);
    const connecting = channelTo(listener.port);
    const served = await listener.accept(5_000);
    opened.push(served);
    const client = await connecting;
    client.send({ bytes: 4096 });
    expect(await served.next(helloMessage, 'the hello', 5_000)).toEqual({
      protocol: 'kvreuse-bench-link',
      version: 1,
      bytes: 4096,
    });
    served.send({ metadata: Buffer.from('agent').toString('base64'), region: 3, bytes: 4096, seed: 7 });
    expect(await client.next(acceptMessage, 'the answer', 5_000)).toMatchObject({ region: 3, bytes: 4096, seed: 7 });
    await client.sendLast({ done: true });
    expect(await served.next(doneMessage, 'the end', undefined)).toMatchObject({ done: true });
  });

  it('a line that is not JSON, or not the message expected, is a PEER_PROTOCOL error naming what is wrong', async () => {
    const garbage = await channelTo(await peerThat((socket) => socket.write('SSH-2.0-OpenSSH\n')));
    const notJson = await failure(garbage.next(acceptMessage, 'the answer', 5_000));
    expect(codeOf(notJson)).toBe('PEER_PROTOCOL');
    expect(notJson.message).toMatch(
      /^the peer 127\.0\.0\.1:\d+ sent "SSH-2\.0-OpenSSH", which is not kvreuse bench link's exchange$/,
    );

    const otherVersion = await channelTo(
      await peerThat((socket) => socket.write('{"protocol":"kvreuse-bench-link","version":2,"bytes":1}\n')),
    );
    const wrong = await failure(otherVersion.next(helloMessage, 'the hello', 5_000));
    expect(codeOf(wrong)).toBe('PEER_PROTOCOL');
    expect(wrong.message).toContain('sent a line that is not the hello of kvreuse-bench-link version 1: version:');
  });

  it('a peer that says nothing is a PEER_TIMEOUT error; one that hangs up is a PEER_PROTOCOL error', async () => {
    const silent = await channelTo(await peerThat(() => undefined));
    const timedOut = await failure(silent.next(acceptMessage, 'the answer to the hello', 50));
    expect(codeOf(timedOut)).toBe('PEER_TIMEOUT');
    expect(timedOut.message).toMatch(
      /^the answer to the hello from 127\.0\.0\.1:\d+ did not come within 0\.05 s \(see --timeout\)$/,
    );

    const hangsUp = await channelTo(await peerThat((socket) => socket.end()));
    const closed = await failure(hangsUp.next(acceptMessage, 'the answer', 5_000));
    expect(codeOf(closed)).toBe('PEER_PROTOCOL');
    expect(closed.message).toMatch(/closed the connection before the exchange ended$/);
  });

  it('nobody listening: PEER_UNREACHABLE once the deadline passes', async () => {
    const port = await peerThat(() => undefined);
    opened.pop()?.close();
    const error = await failure(connectToListener('127.0.0.1', port, 300));
    expect(codeOf(error)).toBe('PEER_UNREACHABLE');
    expect(error.message).toMatch(new RegExp(`^the peer 127\\.0\\.0\\.1:${port} cannot be reached: `));
  });

  it('a listener no peer connects to within its timeout: PEER_TIMEOUT; a port in use: USAGE naming it', async () => {
    const listener = await LinkListener.open('127.0.0.1', 0);
    opened.push(listener);
    const error = await failure(listener.accept(50));
    expect(codeOf(error)).toBe('PEER_TIMEOUT');
    expect(error.message).toBe('a connection from any peer did not come within 0.05 s (see --timeout)');

    const inUse = await failure(LinkListener.open('127.0.0.1', listener.port));
    expect(codeOf(inUse)).toBe('USAGE');
    expect(inUse.message).toContain(`cannot listen on 127.0.0.1:${listener.port}: listen EADDRINUSE`);
  });

  it('an --address that is no address of this host: USAGE naming --address', async () => {
    const elsewhere = await failure(LinkListener.open('192.0.2.1', 0));
    expect(codeOf(elsewhere)).toBe('USAGE');
    expect(elsewhere.message).toBe(
      'bench link: --address "192.0.2.1" is not an IP address of this host (see kvreuse bench link --help)',
    );
  });
});
