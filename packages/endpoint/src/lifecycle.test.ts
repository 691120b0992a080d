import { describe, expect, it, vi } from 'vitest';
import { EndpointOptionError } from './errors.js';
import { EndpointStateError } from './lifecycle.js';
import { EndpointLifecycle, type EndpointTransition } from './lifecycle.js';

function recorded(): { lifecycle: EndpointLifecycle; transitions: EndpointTransition[] } {
  const lifecycle = new EndpointLifecycle();
  const transitions: EndpointTransition[] = [];
  lifecycle.onTransition((transition) => transitions.push(transition));
  return { lifecycle, transitions };
}

describe('EndpointLifecycle', () => {
  it('walks create → register → publish → ready → drain → close, one event per transition', () => {
    const { lifecycle, transitions } = recorded();
    for (const to of [
      'registering',
      'registered',
      'publishing',
      'published',
      'ready',
      'draining',
      'drained',
      'closing',
      'closed',
    ] as const) {
      lifecycle.move(to, `to ${to}`);
    }
    expect(transitions.map(({ from, to }) => `${from}→${to}`)).toEqual([
      'created→registering',
      'registering→registered',
      'registered→publishing',
      'publishing→published',
      'published→ready',
      'ready→draining',
      'draining→drained',
      'drained→closing',
      'closing→closed',
    ]);
    expect(lifecycle.state).toBe('closed');
  });

  it('lets readiness come and go, and a failed registration or publication go back to be retried', () => {
    const { lifecycle, transitions } = recorded();
    lifecycle.move('registering', 'register()');
    lifecycle.move('created', 'registration failed: NO_MEMORY');
    lifecycle.move('registering', 'register()');
    lifecycle.move('registered', 'registered');
    lifecycle.move('publishing', 'publish()');
    lifecycle.move('registered', 'publication failed: discovery unreachable');
    lifecycle.move('publishing', 'publish()');
    lifecycle.move('published', 'published');
    lifecycle.move('ready', 'every rank part present, every gate passed');
    lifecycle.move('published', 'rank 1 withdrew its part');
    expect(transitions.at(-1)).toEqual({ from: 'ready', to: 'published', reason: 'rank 1 withdrew its part' });
  });

  it('refuses a move the state does not lead to, naming the states that do, and changes nothing', () => {
    const { lifecycle, transitions } = recorded();
    const error = (() => {
      try {
        lifecycle.move('ready', 'too early');
      } catch (caught) {
        return caught;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(EndpointStateError);
    expect((error as EndpointStateError).message).toBe(
      'move to ready is not allowed while the endpoint is created (only while published)',
    );
    expect(lifecycle.state).toBe('created');
    expect(transitions).toEqual([]);
  });

  it('require names the refused call, the state and the states that allow it', () => {
    const lifecycle = new EndpointLifecycle();
    expect(() => lifecycle.require('pull', ['registered', 'published', 'ready'])).toThrow(
      'pull is not allowed while the endpoint is created (only while registered, published, ready)',
    );
    expect(() => lifecycle.require('close', ['created', 'drained'])).not.toThrow();
  });

  it('a closed endpoint leads nowhere', () => {
    const lifecycle = new EndpointLifecycle();
    lifecycle.move('closing', 'close() before register');
    lifecycle.move('closed', 'closed');
    expect(() => lifecycle.move('created', 'again')).toThrow(
      'move to created is not allowed while the endpoint is closed',
    );
  });

  it('a throwing listener is reported as a warning and does not stop the others', () => {
    const lifecycle = new EndpointLifecycle();
    const seen: string[] = [];
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning.message);
    process.on('warning', onWarning);
    lifecycle.onTransition(() => {
      throw new Error('listener broke');
    });
    lifecycle.onTransition(({ to }) => seen.push(to));
    lifecycle.move('registering', 'register()');
    expect(seen).toEqual(['registering']);
    return new Promise<void>((resolve) => {
      setImmediate(() => {
        process.off('warning', onWarning);
        expect(warnings).toEqual(['endpoint: a transition listener threw: listener broke']);
        resolve();
      });
    });
  });

  it('tells every listener the transitions in the order they happened when a listener moves it on', () => {
    const lifecycle = new EndpointLifecycle();
    lifecycle.onTransition(({ to }) => {
      if (to === 'registering') lifecycle.move('registered', 'moved by a listener');
    });
    const seen: string[] = [];
    lifecycle.onTransition(({ from, to }) => seen.push(`${from}→${to}`));
    lifecycle.move('registering', 'register()');
    expect(seen).toEqual(['created→registering', 'registering→registered']);
    expect(lifecycle.state).toBe('registered');
  });

  it('refuses a transition listener that is no function, adding nothing', () => {
    const lifecycle = new EndpointLifecycle();
    expect(() => lifecycle.onTransition(undefined as never)).toThrow(
      new EndpointOptionError('listener', undefined, 'a function'),
    );
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      lifecycle.move('registering', 'register()');
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });
});
