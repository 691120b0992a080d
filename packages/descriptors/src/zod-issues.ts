import { messageOf } from '@kvreuse/errors';
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

/** The path of the first field of `value` that throws when it is read (a getter, a proxy), or `undefined`. */
function unreadablePath(value: unknown, path: readonly PropertyKey[], seen: Set<object>): PropertyKey[] | undefined {
  if (value === null || typeof value !== 'object' || seen.has(value)) return undefined;
  seen.add(value);
  let keys: string[];
  try {
    keys = Object.keys(value);
  } catch {
    return [...path];
  }
  for (const key of keys) {
    const childPath = [...path, Array.isArray(value) ? Number(key) : key];
    let child: unknown;
    try {
      child = (value as Record<string, unknown>)[key];
    } catch {
      return childPath;
    }
    const found = unreadablePath(child, childPath, seen);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * The issue of an input that threw while it was read (a getter, a proxy): nothing of it can be checked. It names
 * the field that throws when reading the input again finds it, else the root.
 */
export function unreadableInput(error: unknown, input: unknown): FieldIssue {
  const reason = messageOf(error);
  const path = unreadablePath(input, [], new Set());
  return { field: fieldPath(path ?? []), value: undefined, rule: `could not be read: ${reason}` };
}

export function toFieldIssues(error: z.ZodError, input: unknown): FieldIssue[] {
  return error.issues.map((issue) => {
    // An unrecognized key is reported on its parent object; name the key itself.
    if (issue.code === 'unrecognized_keys') {
      const field = fieldPath([...issue.path, issue.keys.join(', ')]);
      return { field, value: issue.keys, rule: 'unknown field' };
    }
    // A rule over several fields gives the value it judged, not the whole object holding them.
    const judged = issue.code === 'custom' && issue.params !== undefined && 'value' in issue.params;
    const value: unknown = judged ? issue.params?.['value'] : valueAt(input, issue.path);
    return { field: fieldPath(issue.path), value, rule: issue.message };
  });
}
