export class CrashOnPin {
    pool;
    #crash;
    #armed = false;
    /** `crash` ends the rank without a drain (SIGKILL for a rank process). */
    constructor(pool, crash) {
        this.pool = pool;
        this.#crash = crash;
    }
    /** The next pin request crashes the rank instead of being answered. */
    arm() {
        this.#armed = true;
    }
    requestPin(pinId, hashes) {
        if (!this.#armed)
            return this.pool.requestPin(pinId, hashes);
        this.#crash();
        // A crashed rank answers nothing.
        return new Promise(() => undefined);
    }
    renewPin(pinId) {
        return this.pool.renewPin(pinId);
    }
    releasePin(pinId) {
        this.pool.releasePin(pinId);
    }
    cancelPin(pinId) {
        this.pool.cancelPin(pinId);
    }
    onEvicted(listener) {
        return this.pool.onEvicted(listener);
    }
}
