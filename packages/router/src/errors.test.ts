import { describe, expect, it } from 'vitest';
import {
  CalibrationClockError,
  PullNotStartedError,
  ReceiptError,
  RouteRequestError,
  RouterError,
  RouterOptionError,
} from './errors.js';

describe('router errors', () => {
  it.each([
    [
      new RouteRequestError('localBlocks', -1, 'a whole number ≥ 0'),
      'INVALID_ROUTE_REQUEST',
      'route request localBlocks = -1 is refused: a whole number ≥ 0',
    ],
    [
      new RouterOptionError('clock', 'now', 'a function'),
      'INVALID_ROUTER_OPTION',
      'router option clock = "now" is refused: a function',
    ],
    [
      new ReceiptError('transferMs', -2, 'a finite number ≥ 0'),
      'INVALID_RECEIPT',
      'transfer receipt transferMs = -2 is refused: a finite number ≥ 0',
    ],
    [
      new CalibrationClockError('not-finite', NaN, 'it read NaN, not a finite number of milliseconds'),
      'INVALID_CALIBRATION_CLOCK',
      'calibration clock options.now is refused: it read NaN, not a finite number of milliseconds; the calibration is unchanged',
    ],
    [
      new PullNotStartedError('decode-1', 3),
      'PULL_NOT_STARTED',
      'no pull from source decode-1 (epoch 3) is in progress: a pull ends once, after it started',
    ],
  ])('%s carries its code and names the value', (error, code, message) => {
    expect(error).toBeInstanceOf(RouterError);
    expect(error.code).toBe(code);
    expect(error.message).toBe(message);
    expect(error.name).toBe(error.constructor.name);
  });
});
