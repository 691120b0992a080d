import { describe, expect, it } from 'vitest';
import { loopbackWorlds } from '../test/support/loopback-worlds.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { shutdownOnSignals, type SignalTarget } from './signals.js';

// A manual clock that is never advanced: no shutdown deadline fires.
const { world, refusedBank } = loopbackWorlds({ ranks: 1, banksPerRank: 2, clock: new ManualClock() });

function fakeProcess() {
  const handlers = new Map<string, () => void>();
  const exits: number[] = [];
  const target: SignalTarget = {
    on: (signal, listener) => handlers.set(signal, listener),
    off: (signal) => handlers.delete(signal),
    exit: (code) => void exits.push(code ?? 0),
  };
  return { handlers, exits, target };
}

/** Resolves after `promise` and the callbacks chained on it. */
const settled = (promise: Promise<unknown>) => promise.then(() => new Promise((resolve) => setImmediate(resolve)));

describe('shutdownOnSignals', () => {
  it('refuses a controller or options of the wrong shape, naming the option, and installs nothing', () => {
    const { handlers, target } = fakeProcess();
    const controller = { shutdown: () => new Promise<never>(() => {}) };
    const refused = (option: string) => expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option });
    expect(() => shutdownOnSignals({} as never, { target })).toThrow(refused('controller.shutdown'));
    expect(() => shutdownOnSignals(controller, null as never)).toThrow(refused('options'));
    expect(() => shutdownOnSignals(controller, { target, signals: 'SIGTERM' } as never)).toThrow(refused('signals'));
    expect(() => shutdownOnSignals(controller, { target: { on: () => {} } } as never)).toThrow(refused('target.off'));
    expect(() => shutdownOnSignals(controller, { target, onResult: 'log' } as never)).toThrow(refused('onResult'));
    expect(() => shutdownOnSignals(controller, { target, exit: 'no' } as never)).toThrow(refused('exit'));
    expect(handlers.size).toBe(0);
  });

  it('runs one shutdown for any number of signals, exits with 0 when nothing was retained, and can be removed', async () => {
    const w = await world();
    const { handlers, exits, target } = fakeProcess();
    let results = 0;
    const dispose = shutdownOnSignals(w.controller, { target, onResult: () => (results += 1) });
    expect([...handlers.keys()]).toEqual(['SIGTERM', 'SIGINT']);
    handlers.get('SIGTERM')!();
    handlers.get('SIGINT')!();
    await settled(w.controller.shutdown());
    expect(exits).toEqual([0, 0]);
    expect(results).toBe(2);
    expect(w.reader.isOpen).toBe(false);
    dispose();
    expect(handlers.size).toBe(0);
  });

  it('removes the handlers it installed when the signals array was changed since', () => {
    const { handlers, target } = fakeProcess();
    const signals: NodeJS.Signals[] = ['SIGTERM'];
    const dispose = shutdownOnSignals({ shutdown: () => new Promise<never>(() => {}) }, { target, signals });
    signals[0] = 'SIGHUP';
    dispose();
    expect(handlers.size).toBe(0);
  });

  it('passes a throwing onResult to onError and still exits, with 1', async () => {
    const w = await world();
    const { handlers, exits, target } = fakeProcess();
    const errors: unknown[] = [];
    shutdownOnSignals(w.controller, {
      target,
      signals: ['SIGTERM'],
      onResult: () => {
        throw new Error('the log is closed');
      },
      onError: (error) => errors.push(error),
    });
    handlers.get('SIGTERM')!();
    await settled(w.controller.shutdown());
    expect(errors).toEqual([new Error('the log is closed')]);
    expect(exits).toEqual([1]);
  });

  it('exits with 1 when something was retained', async () => {
    const w = await world();
    await refusedBank(w);
    const { handlers, exits, target } = fakeProcess();
    shutdownOnSignals(w.controller, { target, signals: ['SIGTERM'] });
    handlers.get('SIGTERM')!();
    await settled(w.controller.shutdown());
    expect(exits).toEqual([1]);
  });
});
