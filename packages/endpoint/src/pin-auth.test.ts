import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterSecret } from '@kvreuse/discovery';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { pinMessage } from '../test/support/pin-message-arbitrary.js';
import { EndpointOptionError } from './errors.js';
import { openPinMessage, PinChannel, pinTagBytes, sealPinBytes, sealPinMessage } from './pin-auth.js';
import { encodePinMessage, maxPinMessageBytes } from './pin-messages.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-pin-auth-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function secretFile(name: string, fill: string): ClusterSecret {
  const path = join(dir, name);
  writeFileSync(path, fill.repeat(32), { mode: 0o600 });
  return ClusterSecret.read(path);
}

const secret = secretFile('cluster', 'a');
const otherSecret = secretFile('other', 'b');

describe('authenticated pin messages', () => {
  it('open what was sealed for the same sender and receiver, within one notification', () => {
    fc.assert(
      fc.property(pinMessage, (message) => {
        const sealed = sealPinMessage(secret, 'reader', 'source', message);
        expect(sealed.length).toBe(encodePinMessage(message).length + pinTagBytes);
        expect(sealed.length).toBeLessThanOrEqual(maxPinMessageBytes + pinTagBytes);
        expect(openPinMessage(secret, 'reader', 'source', sealed)).toEqual({ success: true, data: message });
      }),
    );
  });

  it('refuse as unauthenticated another sender, another receiver, another secret, and any changed byte', () => {
    fc.assert(
      fc.property(pinMessage, fc.nat(), fc.integer({ min: 1, max: 255 }), (message, at, flip) => {
        const sealed = sealPinMessage(secret, 'reader', 'source', message);
        const changed = sealed.slice();
        const index = at % changed.length;
        changed[index] = (changed[index] as number) ^ flip;
        for (const [opened, by] of [
          [openPinMessage(secret, 'intruder', 'source', sealed), 'another sender'],
          [openPinMessage(secret, 'reader', 'other-source', sealed), 'another receiver'],
          [openPinMessage(otherSecret, 'reader', 'source', sealed), 'another secret'],
          [openPinMessage(secret, 'reader', 'source', changed), 'a changed byte'],
          [openPinMessage(secret, 'reader', 'source', sealed.subarray(0, sealed.length - 1)), 'a cut tag'],
        ] as const) {
          expect(opened, by).toMatchObject({ success: false, reason: 'unauthenticated' });
        }
      }),
    );
  });

  it('do not run a sender and receiver name together: (ab, c) and (a, bc) tag differently', () => {
    const sealed = sealPinMessage(secret, 'ab', 'c', { kind: 'released', pinId: 'p' });
    expect(openPinMessage(secret, 'a', 'bc', sealed)).toMatchObject({ success: false, reason: 'unauthenticated' });
  });

  it('refuse as malformed an authenticated message this build cannot read, and as unauthenticated what is too short or too long', () => {
    const version9 = sealPinBytes(secret, 'reader', 'source', Uint8Array.of(0x50, 0x4b, 9, 0));
    expect(openPinMessage(secret, 'reader', 'source', version9)).toMatchObject({
      success: false,
      reason: 'malformed',
      error: { message: expect.stringContaining('version 9') },
    });
    expect(openPinMessage(secret, 'reader', 'source', new Uint8Array(pinTagBytes - 1))).toMatchObject({
      reason: 'unauthenticated',
    });
    expect(
      openPinMessage(secret, 'reader', 'source', new Uint8Array(maxPinMessageBytes + pinTagBytes + 1)),
    ).toMatchObject({ reason: 'unauthenticated' });
  });
});

describe('PinChannel', () => {
  it('refuses options of another shape with EndpointOptionError naming the option', () => {
    const agent = { name: 'reader', sendNotification: () => undefined };
    expect(() => new PinChannel(undefined as never)).toThrow(
      new EndpointOptionError('options', undefined, 'PinChannel options: { agent, secret, onRefused? }'),
    );
    expect(() => new PinChannel({ agent: {} as never, secret })).toThrow(
      new EndpointOptionError('agent', {}, "this rank's Agent (its sendNotification and name)"),
    );
    expect(() => new PinChannel({ agent: { ...agent, name: 7 as never }, secret })).toThrow(
      new EndpointOptionError('agent.name', 7, "the agent's name"),
    );
    expect(() => new PinChannel({ agent, secret: 'a'.repeat(32) as never })).toThrow(
      new EndpointOptionError('secret', 'a'.repeat(32), 'the ClusterSecret the cluster shares'),
    );
    expect(() => new PinChannel({ agent, secret, onRefused: 'log' as never })).toThrow(
      new EndpointOptionError('onRefused', 'log', 'a function'),
    );
    expect(new PinChannel({ agent, secret }).refusedMessages.unauthenticated).toBe(0);
  });
});
