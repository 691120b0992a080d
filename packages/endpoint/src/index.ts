export { EndpointError, type EndpointErrorCode, EndpointOptionError } from './errors.js';
export type { HeldPin, PinLoss, PinLossReason } from './pins.js';
