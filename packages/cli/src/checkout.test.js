import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { findCheckout } from './checkout.js';
const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
describe('findCheckout', () => {
    it('finds the repository root from any folder inside it', () => {
        expect(findCheckout(repoRoot)).toBe(repoRoot);
        expect(findCheckout(join(repoRoot, 'packages/cli/src'))).toBe(repoRoot);
    });
    it('finds nothing outside a checkout', () => {
        const outside = mkdtempSync(join(tmpdir(), 'kvreuse-cli-find-'));
        try {
            expect(findCheckout(outside)).toBeUndefined();
        }
        finally {
            rmSync(outside, { recursive: true, force: true });
        }
    });
});
