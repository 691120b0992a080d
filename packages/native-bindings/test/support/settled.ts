/** Whether `promise` settled by the time the agent's thread had a chance to answer (the tests stall it). */
export async function settledYet(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise<void>((resolve) => setImmediate(resolve));
  return settled;
}
