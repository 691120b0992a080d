import { expect } from 'vitest';

/** The error `run` throws, checked to be a `type`; fails the test when `run` throws nothing. */
export function thrown<T extends Error>(run: () => unknown, type: abstract new (...args: never[]) => T): T {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(type);
    return error as T;
  }
  throw new Error(`expected a ${type.name}`);
}
