// Awaiting work that goes on after its caller gave up: the caller ends at the abort, the work settles on its own.

/**
 * `work`'s outcome, or a rejection with `signal`'s reason as soon as it aborts (at once when it already has),
 * whichever comes first. The work is not stopped: what it holds once it settles is the caller's to give back.
 */
export async function unlessAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  signal.throwIfAborted();
  let stopListening = (): void => undefined;
  const aborted = new Promise<never>((_resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    stopListening = () => signal.removeEventListener('abort', onAbort);
  });
  try {
    return await Promise.race([work, aborted]);
  } finally {
    stopListening();
  }
}
