/**
 * A clock that moves only when the test moves it: a lease expires when the test says so, never
 * because the machine was slow. Stores take `now` from it; touch the store after `advance` to let
 * it expire the leases the clock passed.
 */
export class ManualClock {
  #now = 1_000_000;
  readonly now = (): number => this.#now;

  advance(ms: number): void {
    this.#now += ms;
  }
}
