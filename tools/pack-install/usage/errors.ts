import { codeOf, describeValue, isKvreuseError, KvreuseError } from '@kvreuse/errors';

// A package's own error: a subclass of KvreuseError with a stable code.
class QuotaError extends KvreuseError<'QUOTA_EXCEEDED'> {
  readonly code = 'QUOTA_EXCEEDED';
}

const error = new QuotaError(`quota exceeded by ${describeValue(3n)} blocks`);
console.log(
  JSON.stringify({
    code: codeOf(error),
    isKvreuseError: isKvreuseError(error),
    plainError: isKvreuseError(new Error('not ours')),
    message: error.message,
  }),
);
