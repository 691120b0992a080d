/**
 * The error vocabulary every kvreuse package shares: one base with a stable `code`, one shape for a
 * refused option, and the rendering of refused values.
 *
 * @packageDocumentation
 * @module \@kvreuse/errors
 */
export { CleanupFailedError, keepCleanupFailures } from './cleanup-failure.js';
export { describeFileFailure } from './describe-file-failure.js';
export { describeValue } from './describe-value.js';
export { codeOf, isKvreuseError, KvreuseError, KvreuseTypeError } from './kvreuse-error.js';
export { causeSuffix, messageOf } from './message-of.js';
export { OptionError } from './option-error.js';
export { printable } from './printable.js';
export { redactCredentials, redactValue } from './redact-credentials.js';
