import { BlockPool } from '@kvreuse/endpoint';
import { describe, expect, it } from 'vitest';
import { CrashOnPin } from './crash-on-pin.js';
describe('CrashOnPin', () => {
    it('is the block pool until armed; armed, the next pin request crashes the rank and is never answered', async () => {
        const pool = new BlockPool(2);
        pool.commit(pool.allocate(), 7n);
        let crashes = 0;
        const adapter = new CrashOnPin(pool, () => crashes++);
        expect(adapter.requestPin('a', [7n])).toEqual({ blocks: Uint32Array.of(0) });
        expect(adapter.renewPin('a')).toBe(true);
        adapter.releasePin('a');
        expect(pool.pinsOn(0)).toBe(0);
        adapter.arm();
        const answer = adapter.requestPin('b', [7n]);
        expect(crashes).toBe(1);
        const unanswered = Symbol('unanswered');
        expect(await Promise.race([answer, Promise.resolve(unanswered)])).toBe(unanswered);
        expect(pool.pinsOn(0)).toBe(0);
    });
});
