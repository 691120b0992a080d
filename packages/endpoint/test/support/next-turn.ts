/** Resolves on the event loop's next turn, after what the current one queued (timers' deferred judgements). */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
