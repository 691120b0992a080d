import { describeValue } from './describe-value.js';
import { KvreuseError } from './kvreuse-error.js';

/**
 * The one shape of a refused option: which option (`subject` names whose, e.g. `endpoint`), the value
 * as given, and the rule it breaks. Each package derives its own class with its own code; nothing was
 * started when one is thrown.
 */
export abstract class OptionError<Code extends string = string> extends KvreuseError<Code> {
  constructor(
    readonly subject: string,
    readonly option: string,
    readonly value: unknown,
    readonly rule: string,
    options?: ErrorOptions,
  ) {
    super(`${subject} option ${option} = ${describeValue(value)} is refused: ${rule}`, options);
  }
}
