/** One thing wrong with an input: where (a dotted path such as `banks[3].bytes`), what was there, and the rule. */
export interface FieldIssue {
  readonly field: string;
  readonly value: unknown;
  readonly rule: string;
}
