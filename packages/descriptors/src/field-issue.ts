/** One thing wrong with an input: where (a dotted path such as `banks[3].bytes`), what was there, and the rule. */
export interface FieldIssue {
  readonly field: string;
  readonly value: unknown;
  readonly rule: string;
}

/** The rule of a field that takes one of `values`: `must be 'dram' or 'vram'`, `must be 1, 2 or 3`. */
export function oneOfRule(values: readonly (string | number)[]): string {
  const shown = values.map((value) => (typeof value === 'string' ? `'${value}'` : String(value)));
  const last = shown.pop();
  return `must be ${shown.length > 0 ? `${shown.join(', ')} or ${last}` : last}`;
}
