// What a command leaves behind if the process is interrupted (SIGINT, SIGTERM) while it runs: a
// command registers how to undo it, and the first interruption runs every undo before the process ends.
const interruptions = ['SIGINT', 'SIGTERM'];
/**
 * Listens for SIGINT and SIGTERM only while a cleanup is registered, so that otherwise they end the
 * process as they always do. The first one runs every cleanup, one after another and the last registered
 * first (a failing one does not stop the others), then raises the same signal again with
 * nobody listening: the process ends by it, and a second interruption during the cleanups ends it at once.
 */
export function interruptCleanups(target) {
    const cleanups = new Set();
    const listen = (on) => {
        for (const signal of interruptions)
            (on ? target.on : target.off).call(target, signal, interrupted);
    };
    function interrupted(signal) {
        listen(false);
        // Last registered first, each to its end: what was started last may still use what was started before it
        // (the demo's ranks drain through the local etcd it started first).
        const pending = [...cleanups].reverse();
        cleanups.clear();
        void (async () => {
            for (const cleanup of pending)
                await Promise.resolve().then(cleanup).catch(() => undefined);
            target.kill(target.pid, signal);
        })();
    }
    return (cleanup) => {
        if (cleanups.size === 0)
            listen(true);
        cleanups.add(cleanup);
        return () => {
            if (cleanups.delete(cleanup) && cleanups.size === 0)
                listen(false);
        };
    };
}
