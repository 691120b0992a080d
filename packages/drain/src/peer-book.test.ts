import { describe, expect, it } from 'vitest';
import { InvalidDrainOptionError, PeerFencedError, PeerUnhealthyError } from './errors.js';
import { PeerBook, type TrackedPeer } from './peer-book.js';

function fakePeer(id: number): TrackedPeer & { generation: bigint; state: 'ready' | 'invalidated' | 'disconnected' } {
  const peer = {
    id,
    generation: 1n,
    state: 'ready' as 'ready' | 'invalidated' | 'disconnected',
    info: () => ({ state: peer.state }),
    invalidate: () => {
      peer.state = 'invalidated';
    },
  };
  return peer;
}

describe('PeerBook', () => {
  it('admits a current ticket and returns the native peer', () => {
    const book = new PeerBook();
    const peer = fakePeer(1);
    const ticket = book.track('decode-0', 'inc-a', peer);
    expect(ticket).toEqual({ name: 'decode-0', incarnation: 'inc-a', generation: 1n });
    expect(book.admit(ticket)).toBe(peer);
  });

  it('fences work prepared for an earlier incarnation: a restarted peer is a new peer', () => {
    const book = new PeerBook();
    const old = book.track('decode-0', 'inc-a', fakePeer(1));
    const fresh = book.track('decode-0', 'inc-b', fakePeer(2));
    const error = (() => {
      try {
        book.admit(old);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(PeerFencedError);
    expect(error).toMatchObject({
      code: 'PEER_FENCED',
      peer: 'decode-0',
      field: 'incarnation',
      expected: 'inc-a',
      actual: 'inc-b',
    });
    expect(book.admit(fresh).id).toBe(2);
  });

  it('fences work prepared for an older metadata generation', () => {
    const book = new PeerBook();
    const peer = fakePeer(1);
    const ticket = book.track('decode-0', 'inc-a', peer);
    peer.generation = 2n;
    expect(() => book.admit(ticket)).toThrow(
      expect.objectContaining({ code: 'PEER_FENCED', field: 'generation', expected: 1n, actual: 2n }),
    );
    expect(book.admit(book.ticket('decode-0'))).toBe(peer);
  });

  it('refuses unknown peers, and bad names and incarnations', () => {
    const book = new PeerBook();
    expect(() => book.admit({ name: 'nobody', incarnation: 'x', generation: 1n })).toThrow(PeerFencedError);
    for (const ticket of [undefined, null, 'decode-0'])
      expect(() => book.admit(ticket as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'ticket' }),
      );
    expect(() => book.track('', 'x', fakePeer(1))).toThrow(InvalidDrainOptionError);
    expect(() => book.track('p', '', fakePeer(1))).toThrow(/incarnation of peer p/);
    expect(() => book.track('p', 'x', undefined as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'peer p' }),
    );
    expect(() => book.track('p', 'x', { id: 1, generation: 1 } as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'peer p.generation' }),
    );
    expect(() => new PeerBook(5 as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'now' }),
    );
  });

  it('keeps an unhealthy peer refused (first reason) until it is tracked again', () => {
    let now = 5;
    const book = new PeerBook(() => now);
    const peer = fakePeer(1);
    const ticket = book.track('decode-0', 'inc-a', peer);
    book.markUnhealthy('decode-0', 'operation 3 timed out');
    now = 9;
    book.markUnhealthy('decode-0', 'second reason');
    expect(book.health('decode-0')).toEqual({ healthy: false, reason: 'operation 3 timed out', since: 5 });
    expect(() => book.admit(ticket)).toThrow(PeerUnhealthyError);
    expect(() => book.admit(ticket)).toThrow(/operation 3 timed out/);
    book.track('decode-0', 'inc-a', peer);
    expect(book.admit(ticket)).toBe(peer);
  });

  it('refuses a reason to mark a peer unhealthy that is not a non-empty string, naming it, and leaves the peer healthy', () => {
    const book = new PeerBook();
    book.track('decode-0', 'inc-a', fakePeer(1));
    for (const reason of ['', undefined, 5])
      expect(() => book.markUnhealthy('decode-0', reason as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'reason', value: reason }),
      );
    expect(book.health('decode-0')).toEqual({ healthy: true });
  });

  it('probes the native state and marks a disconnected peer unhealthy', () => {
    const book = new PeerBook();
    const peer = fakePeer(1);
    book.track('decode-0', 'inc-a', peer);
    expect(book.probe('decode-0')).toBe('ready');
    expect(book.health('decode-0').healthy).toBe(true);
    peer.state = 'disconnected';
    expect(book.probe('decode-0')).toBe('disconnected');
    expect(book.health('decode-0')).toMatchObject({
      healthy: false,
      reason: 'the native layer reports it disconnected',
    });
    expect(book.probe('unknown')).toBeUndefined();
  });

  it('invalidates every tracked peer natively', () => {
    const book = new PeerBook();
    const a = fakePeer(1);
    const b = fakePeer(2);
    book.track('a', 'x', a);
    book.track('b', 'y', b);
    expect(book.invalidateAll()).toEqual(['a', 'b']);
    expect([a.state, b.state]).toEqual(['invalidated', 'invalidated']);
    expect(() => book.admit(book.ticket('a'))).toThrow(/invalidated by shutdown/);
  });

  it('forgets a peer whose handle was unloaded: its tickets are fenced as not tracked; another handle under the name stays', () => {
    const book = new PeerBook();
    const unloaded = { id: 1, generation: 1n };
    book.track('decode-0', 'inc-a', unloaded);
    const ticket = book.ticket('decode-0');
    const reloaded = { id: 2, generation: 1n };
    book.track('decode-1', 'inc-a', reloaded);
    book.forget('decode-1', unloaded);
    expect(book.names()).toEqual(['decode-0', 'decode-1']);
    book.forget('decode-0', unloaded);
    expect(book.names()).toEqual(['decode-1']);
    expect(() => book.admit(ticket)).toThrow(new PeerFencedError('decode-0', 'tracking', 'inc-a', 'not tracked'));
    book.forget('nobody', unloaded);
  });
});
