import type { z } from 'zod';
import type { FieldIssue } from './field-issue.js';

/** `['banks', 3, 'bytes']` → `banks[3].bytes`. */
export function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out === '' ? '(root)' : out;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/** The issue of an input that threw while it was read (a getter, a proxy): nothing of it can be checked. */
export function unreadableInput(error: unknown): FieldIssue {
  const reason = error instanceof Error ? error.message : String(error);
  return { field: '(root)', value: undefined, rule: `could not be read: ${reason}` };
}

export function toFieldIssues(error: z.ZodError, input: unknown): FieldIssue[] {
  return error.issues.map((issue) => {
    // An unrecognized key is reported on its parent object; name the key itself.
    if (issue.code === 'unrecognized_keys') {
      const field = fieldPath([...issue.path, issue.keys.join(', ')]);
      return { field, value: issue.keys, rule: 'unknown field' };
    }
    return { field: fieldPath(issue.path), value: valueAt(input, issue.path), rule: issue.message };
  });
}
