import { describe, expect, it } from 'vitest';
import {
  BankAlreadyRegisteredError,
  BankAlreadyReleasedError,
  BankInUseError,
  BankOwnerReleaseError,
  BankReferenceReleasedError,
  BankReinstateError,
  BankStateError,
  InvalidBankError,
} from '../errors.js';
import type { BankState } from './label.js';
import type { Region } from '@kvreuse/native-bindings';
import { Bank, type BankSpec } from './bank.js';
import { frameworkOwner, kvreuseOwner } from './owner.js';

const spec: BankSpec = {
  tpRank: 1,
  ppRank: 0,
  index: 3,
  memKind: 'dram',
  deviceId: 0,
  address: 0x7f00_0000_0000n,
  bytes: 4096n * 16n,
  blocks: 16,
  blockStride: 4096n,
};

function frameworkBank(): { bank: Bank; releases: number[] } {
  const releases: number[] = [];
  const bank = Bank.adopt(
    spec,
    frameworkOwner({ engine: 'test' }, () => void releases.push(1)),
  );
  return { bank, releases };
}

/** Drives a fresh bank into `state` through legal transitions only. */
async function bankIn(state: BankState): Promise<Bank> {
  const { bank } = frameworkBank();
  if (state === 'owned') return bank;
  bank.beginRegistration();
  if (state === 'registering') return bank;
  bank.completeRegistration(region(7), 'test-agent');
  if (state === 'registered') return bank;
  if (state === 'retained') {
    bank.retain('test');
    return bank;
  }
  bank.beginRelease();
  if (state === 'releasing') return bank;
  bank.markDeregistered();
  await bank.completeRelease();
  return bank;
}

describe('Bank.adopt', () => {
  it('refuses a spec that is not an object, naming it', () => {
    expect(() =>
      Bank.adopt(
        undefined as never,
        frameworkOwner('t', () => {}),
      ),
    ).toThrow(expect.objectContaining({ code: 'INVALID_BANK', field: 'spec' }));
  });

  it('starts owned, unregistered and unreferenced, and registers nothing', () => {
    const { bank, releases } = frameworkBank();
    expect([bank.state, bank.region, bank.references]).toEqual(['owned', undefined, 0]);
    expect(releases).toEqual([]);
  });

  it('labels itself with a plain snapshot of its rank, index, address and size', () => {
    const { bank } = frameworkBank();
    const label = bank.label();
    expect(label).toStrictEqual({ tpRank: 1, ppRank: 0, index: 3, address: 0x7f00_0000_0000n, bytes: 65_536n });
    expect(Object.getPrototypeOf(label)).toBe(Object.prototype);
  });

  it.each([
    ['address', { address: 0n }],
    ['bytes', { bytes: -1n }],
    ['bytes', { address: (1n << 64n) - 4096n, bytes: 8192n, blocks: 1, blockStride: 4096n }],
    ['blocks', { blocks: 17 }],
    ['blocks', { blocks: 0 }],
    ['blockStride', { blockStride: 0n }],
    ['planeStride', { planeStride: 0n }],
    ['planeStride', { planeStride: 2048 }],
    ['memKind', { memKind: 'hbm' }],
    ['deviceId', { deviceId: -1 }],
    ['index', { index: -1 }],
    ['tpRank', { tpRank: 0.5 }],
    ['address', { address: 4096 }],
    ['file', { file: { fd: -1, offset: 0 } }],
    ['file', { file: { fd: 3 } }],
    ['file', { memKind: 'vram', file: { fd: 3, offset: 0 } }],
  ])('refuses a bad %s, naming it', (field, patch) => {
    const error = captureError(() =>
      Bank.adopt(
        { ...spec, ...patch } as BankSpec,
        frameworkOwner(1, () => {}),
      ),
    );
    expect(error).toBeInstanceOf(InvalidBankError);
    expect((error as InvalidBankError).field).toBe(field);
  });

  it('keeps the file a dram bank is a mapping of, and has none otherwise', () => {
    const owner = frameworkOwner(1, () => {});
    expect(Bank.adopt({ ...spec, file: { fd: 7, offset: 8192 } }, owner).file).toEqual({ fd: 7, offset: 8192 });
    expect('file' in Bank.adopt(spec, owner)).toBe(false);
  });

  it('keeps a plane stride when given, and has none otherwise', () => {
    expect(
      Bank.adopt(
        { ...spec, planeStride: 2048n },
        frameworkOwner(1, () => {}),
      ).planeStride,
    ).toBe(2048n);
    expect(
      'planeStride' in
        Bank.adopt(
          spec,
          frameworkOwner(1, () => {}),
        ),
    ).toBe(false);
  });

  it('refuses owners that cannot take memory back', () => {
    expect(() => Bank.adopt(spec, { kind: 'framework', token: 1 } as never)).toThrow(InvalidBankError);
    expect(() => Bank.adopt(spec, { kind: 'someone' } as never)).toThrow(/owner.kind/);
    expect(() => Bank.adopt(spec, kvreuseOwner({ address: spec.address, bytes: spec.bytes * 2n, free() {} }))).toThrow(
      /exactly its allocation/,
    );
    for (const bytes of [65536.5, Number.NaN, -65536]) {
      expect(() => Bank.adopt(spec, kvreuseOwner({ address: spec.address, bytes, free() {} })), String(bytes)).toThrow(
        expect.objectContaining({ code: 'INVALID_BANK', field: 'owner.allocation' }),
      );
    }
  });
});

describe('Bank ownership state machine', () => {
  it('goes owned → registering → registered → releasing → returned and hands framework memory back once', async () => {
    const { bank, releases } = frameworkBank();
    bank.beginRegistration();
    expect(bank.state).toBe('registering');
    bank.completeRegistration(region(42), 'test-agent');
    expect([bank.state, bank.region?.id]).toEqual(['registered', 42]);
    bank.beginRelease();
    expect(bank.state).toBe('releasing');
    bank.markDeregistered();
    await bank.completeRelease();
    expect([bank.state, bank.region, releases.length]).toEqual(['returned', undefined, 1]);
  });

  it('frees kvreuse-owned memory through its allocation, and only that', async () => {
    const freed: bigint[] = [];
    const bank = Bank.adopt(
      spec,
      kvreuseOwner({ address: spec.address, bytes: spec.bytes, free: () => void freed.push(spec.address) }),
    );
    bank.beginRelease();
    await bank.completeRelease();
    expect(freed).toEqual([spec.address]);
  });

  it('returns to owned when registration aborts or is undone', async () => {
    const aborted = await bankIn('registering');
    aborted.abortRegistration();
    expect(aborted.state).toBe('owned');
    const undone = await bankIn('registered');
    undone.undoRegistration();
    expect([undone.state, undone.region]).toEqual(['owned', undefined]);
    undone.beginRegistration();
    expect(undone.state).toBe('registering');
  });

  it.each(['registering', 'registered', 'retained'] as const)(
    'refuses to register a bank that is %s',
    async (state) => {
      const bank = await bankIn(state);
      expect(() => bank.beginRegistration()).toThrow(BankAlreadyRegisteredError);
      expect(bank.state).toBe(state);
    },
  );

  it.each(['releasing', 'returned'] as const)('refuses to release a bank that is %s', async (state) => {
    const bank = await bankIn(state);
    expect(() => bank.beginRelease()).toThrow(BankAlreadyReleasedError);
    expect(bank.state).toBe(state);
  });

  it('refuses to register a returned bank', async () => {
    const bank = await bankIn('returned');
    expect(() => bank.beginRegistration()).toThrow(BankStateError);
  });

  it('counts references, refuses release and undo while held, and refuses a double release of a reference', async () => {
    const bank = await bankIn('registered');
    const first = bank.acquire();
    const second = bank.acquire();
    expect(bank.references).toBe(2);
    expect(() => bank.beginRelease()).toThrow(BankInUseError);
    expect(() => bank.undoRegistration()).toThrow(BankInUseError);
    first.release();
    expect(() => first.release()).toThrow(BankReferenceReleasedError);
    expect(bank.references).toBe(1);
    second.release();
    bank.beginRelease();
    expect(bank.state).toBe('releasing');
  });

  it.each(['owned', 'registering', 'releasing', 'returned', 'retained'] as const)(
    'refuses a reference to a bank that is %s',
    async (state) => {
      const bank = await bankIn(state);
      expect(() => bank.acquire()).toThrow(BankStateError);
    },
  );

  it('retains a registered bank, keeps its registration, and releases it only once unreferenced', async () => {
    const { bank, releases } = frameworkBank();
    bank.beginRegistration();
    bank.completeRegistration(region(9), 'test-agent');
    const reference = bank.acquire();
    bank.retain('operation 12 past its abandon deadline');
    expect([bank.state, bank.region?.id, bank.retainedReason]).toEqual([
      'retained',
      9,
      'operation 12 past its abandon deadline',
    ]);
    expect(() => bank.beginRelease()).toThrow(BankInUseError);
    reference.release();
    bank.beginRelease();
    await expect(bank.completeRelease()).rejects.toThrow(/still registered/);
    bank.markDeregistered();
    await bank.completeRelease();
    expect([bank.state, releases.length]).toEqual(['returned', 1]);
  });

  it.each(['owned', 'returned'] as const)('refuses to retain a bank that is %s', async (state) => {
    const bank = await bankIn(state);
    expect(() => bank.retain('x')).toThrow(BankStateError);
    expect(() => bank.retain('x', 'quarantine')).toThrow(BankStateError);
    expect(bank.state).toBe(state);
  });

  it.each([
    [
      'completeRegistration',
      (bank: Bank) => bank.completeRegistration(region(1), 'test-agent'),
      ['owned', 'registered', 'releasing', 'returned', 'retained'],
    ],
    [
      'abortRegistration',
      (bank: Bank) => bank.abortRegistration(),
      ['owned', 'registered', 'releasing', 'returned', 'retained'],
    ],
    [
      'undoRegistration',
      (bank: Bank) => bank.undoRegistration(),
      ['owned', 'registering', 'releasing', 'returned', 'retained'],
    ],
    [
      'markDeregistered',
      (bank: Bank) => bank.markDeregistered(),
      ['owned', 'registering', 'registered', 'returned', 'retained'],
    ],
  ] as const)('refuses %s from every state it does not start from', async (_name, transition, states) => {
    for (const state of states) {
      const bank = await bankIn(state);
      expect(() => transition(bank), state).toThrow(BankStateError);
      expect(bank.state).toBe(state);
    }
  });

  it('keeps the bank releasing when the owner refuses it back, and hands it back on retry', async () => {
    let attempts = 0;
    const bank = Bank.adopt(
      spec,
      frameworkOwner('token', () => {
        attempts += 1;
        if (attempts === 1) throw new Error('engine busy');
      }),
    );
    bank.beginRelease();
    const error = await bank.completeRelease().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BankOwnerReleaseError);
    expect((error as Error).message).toMatch(/engine busy.*stays releasing/);
    expect(bank.state).toBe('releasing');
    await bank.completeRelease();
    expect([bank.state, attempts]).toEqual(['returned', 2]);
    await expect(bank.completeRelease()).rejects.toThrow(BankStateError);
  });

  it('refuses a second hand-back while the first is in progress', async () => {
    let finish: () => void = () => {};
    const bank = Bank.adopt(
      spec,
      frameworkOwner('t', () => new Promise<void>((resolve) => (finish = resolve))),
    );
    bank.beginRelease();
    const first = bank.completeRelease();
    await expect(bank.completeRelease()).rejects.toThrow(BankAlreadyReleasedError);
    finish();
    await first;
    expect(bank.state).toBe('returned');
  });

  it('names the bank in every error', async () => {
    const bank = await bankIn('registered');
    expect(() => bank.beginRegistration()).toThrow('bank 3 of rank (tp 1, pp 0) at 0x7f0000000000 (65536 bytes)');
  });
});

describe('Bank retention and reinstatement', () => {
  const quarantine = 'quarantined: operation reader#12 not terminal 250 ms after it was posted';
  const refusal = 'deregistration failed with BUSY: an operation is in progress';

  it('records what retained a bank; a retention without a kind is a native refusal', async () => {
    const quarantined = await bankIn('registered');
    quarantined.retain(quarantine, 'quarantine');
    expect([quarantined.state, quarantined.retainedBy, quarantined.retainedReason]).toEqual([
      'retained',
      'quarantine',
      quarantine,
    ]);
    const refused = await bankIn('releasing');
    refused.retain(refusal);
    expect([refused.state, refused.retainedBy, refused.retainedReason]).toEqual([
      'retained',
      'native-refusal',
      refusal,
    ]);
  });

  it.each(['registering', 'registered', 'releasing'] as const)(
    'retains a %s bank by a native refusal',
    async (state) => {
      const bank = await bankIn(state);
      bank.retain(refusal, 'native-refusal');
      expect([bank.state, bank.retainedBy]).toEqual(['retained', 'native-refusal']);
    },
  );

  it.each(['owned', 'registering', 'releasing', 'returned'] as const)(
    'refuses to quarantine a bank that is %s, naming it and its state',
    async (state) => {
      const bank = await bankIn(state);
      const error = captureError(() => bank.retain(quarantine, 'quarantine'));
      expect(error).toBeInstanceOf(BankStateError);
      expect(error).toMatchObject({ code: 'BANK_INVALID_TRANSITION', state, transition: 'retain (quarantine)' });
      expect((error as Error).message).toBe(
        `bank 3 of rank (tp 1, pp 0) at 0x7f0000000000 (65536 bytes): cannot retain (quarantine) while ${state}`,
      );
      expect([bank.state, bank.retainedBy]).toEqual([state, undefined]);
    },
  );

  it('refuses a retention without its reason in words, leaving the bank as it was', async () => {
    const bank = await bankIn('registered');
    for (const reason of [undefined, '', 5]) {
      expect(() => bank.retain(reason as never), String(reason)).toThrow(
        expect.objectContaining({ code: 'INVALID_BANK', field: 'reason' }),
      );
    }
    expect([bank.state, bank.retainedBy, bank.retainedReason]).toEqual(['registered', undefined, undefined]);
  });

  it('refuses an unknown kind of retention', async () => {
    const bank = await bankIn('registered');
    expect(() => bank.retain('x', 'operator' as never)).toThrow(InvalidBankError);
    expect(() => bank.retain('x', 'operator' as never)).toThrow(/retainedBy = "operator" is refused/);
    expect(bank.state).toBe('registered');
  });

  it('retains a retained bank again without change, keeping the first reason and kind', async () => {
    const quarantined = await bankIn('registered');
    quarantined.retain(quarantine, 'quarantine');
    quarantined.retain('quarantined again by a second operation', 'quarantine');
    expect([quarantined.retainedBy, quarantined.retainedReason]).toEqual(['quarantine', quarantine]);
    const refused = await bankIn('registered');
    refused.retain(refusal);
    refused.retain('quarantined later', 'quarantine');
    refused.retain('refused again');
    expect([refused.state, refused.retainedBy, refused.retainedReason]).toEqual([
      'retained',
      'native-refusal',
      refusal,
    ]);
  });

  it('lets a native refusal supersede a quarantine: the bank can then no longer be reinstated', async () => {
    const bank = await bankIn('registered');
    bank.retain(quarantine, 'quarantine');
    bank.retain(refusal, 'native-refusal');
    expect([bank.state, bank.retainedBy, bank.retainedReason]).toEqual(['retained', 'native-refusal', refusal]);
    expect(() => bank.reinstate()).toThrow(BankReinstateError);
  });

  it('reinstates a quarantined bank once unreferenced: registered again, same registration and owner, in service', async () => {
    const { bank, releases } = frameworkBank();
    const owner = bank.owner;
    bank.beginRegistration();
    const registration = region(9);
    bank.completeRegistration(registration, 'test-agent');
    const operation = bank.acquire();
    bank.retain(quarantine, 'quarantine');
    operation.release();
    bank.reinstate();
    expect([bank.state, bank.references, bank.retainedBy, bank.retainedReason]).toEqual([
      'registered',
      0,
      undefined,
      undefined,
    ]);
    expect(bank.region).toBe(registration);
    expect(bank.owner).toBe(owner);
    expect(releases).toEqual([]);
    // In service again: it takes references, can be quarantined again, and is handed back normally.
    const next = bank.acquire();
    bank.retain('quarantined a second time', 'quarantine');
    expect([bank.state, bank.retainedReason]).toEqual(['retained', 'quarantined a second time']);
    next.release();
    bank.reinstate();
    bank.beginRelease();
    bank.markDeregistered();
    await bank.completeRelease();
    expect([bank.state, releases.length]).toEqual(['returned', 1]);
  });

  it('refuses to reinstate a quarantined bank while referenced, naming the references and the quarantine', async () => {
    const bank = await bankIn('registered');
    const first = bank.acquire();
    const second = bank.acquire();
    bank.retain(quarantine, 'quarantine');
    first.release();
    const error = captureError(() => bank.reinstate());
    expect(error).toBeInstanceOf(BankReinstateError);
    expect(error).toMatchObject({
      code: 'BANK_REINSTATE_REFUSED',
      refusal: 'referenced',
      state: 'retained',
      retainedBy: 'quarantine',
      retainedReason: quarantine,
      references: 1,
      bank: { index: 3, tpRank: 1 },
    });
    expect((error as Error).message).toBe(
      `bank 3 of rank (tp 1, pp 0) at 0x7f0000000000 (65536 bytes): cannot reinstate while retained: 1 reference(s) still hold it (retained by quarantine: ${quarantine})`,
    );
    expect([bank.state, bank.retainedBy]).toEqual(['retained', 'quarantine']);
    second.release();
    bank.reinstate();
    expect(bank.state).toBe('registered');
  });

  it.each(['registering', 'registered', 'releasing'] as const)(
    'refuses to reinstate a bank retained by a native refusal while %s, even unreferenced; it can only be released',
    async (from) => {
      const bank = await bankIn(from);
      bank.retain(refusal);
      const error = captureError(() => bank.reinstate());
      expect(error).toBeInstanceOf(BankReinstateError);
      expect(error).toMatchObject({
        refusal: 'native-refusal',
        state: 'retained',
        retainedBy: 'native-refusal',
        retainedReason: refusal,
        references: 0,
      });
      expect((error as Error).message).toBe(
        `bank 3 of rank (tp 1, pp 0) at 0x7f0000000000 (65536 bytes): cannot reinstate while retained: it was retained by a native refusal (${refusal}), so its registration state is unknown; it can only be released`,
      );
      expect([bank.state, bank.retainedBy]).toEqual(['retained', 'native-refusal']);
      bank.beginRelease();
      expect(bank.state).toBe('releasing');
    },
  );

  it.each(['owned', 'registering', 'registered', 'releasing', 'returned'] as const)(
    'refuses to reinstate a bank that is %s',
    async (state) => {
      const bank = await bankIn(state);
      const error = captureError(() => bank.reinstate());
      expect(error).toBeInstanceOf(BankReinstateError);
      expect(error).toBeInstanceOf(BankStateError);
      expect(error).toMatchObject({ refusal: 'not-retained', state, transition: 'reinstate', retainedBy: undefined });
      expect((error as Error).message).toMatch(
        new RegExp(`: cannot reinstate while ${state}: only a bank retained by a quarantine can be reinstated$`),
      );
      expect(bank.state).toBe(state);
    },
  );

  it('refuses a second reinstatement', async () => {
    const bank = await bankIn('registered');
    bank.retain(quarantine, 'quarantine');
    bank.reinstate();
    expect(() => bank.reinstate()).toThrow(/cannot reinstate while registered/);
  });
});

/** The bank only records its region; native registration is exercised in registration tests. */
function region(id: number): Region {
  return { id, deregister: () => {} } as unknown as Region;
}

function captureError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}
