import type { ValueJsonSchema } from './descriptions.js';

export type Coerced = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly reason: string };

/** How env and argv strings become values; quoted in every coercion error. */
export const COERCION_RULES = 'booleans are true|false|1|0, numbers decimal, lists comma-separated';

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

function coerceScalar(text: string, schema: ValueJsonSchema): Coerced {
  switch (schema['type']) {
    case 'boolean':
      if (text === 'true' || text === '1') return { ok: true, value: true };
      if (text === 'false' || text === '0') return { ok: true, value: false };
      return { ok: false, reason: `cannot read ${JSON.stringify(text)} as a boolean (${COERCION_RULES})` };
    case 'integer':
    case 'number':
      if (DECIMAL.test(text)) return { ok: true, value: Number(text) };
      return { ok: false, reason: `cannot read ${JSON.stringify(text)} as a number (${COERCION_RULES})` };
    default:
      return { ok: true, value: text };
  }
}

/**
 * Turns an env or argv string into a value of the setting's JSON Schema type. Only the reading is done
 * here; the setting's schema then checks the value's rule.
 */
export function coerceText(text: string, schema: ValueJsonSchema): Coerced {
  if (schema['type'] !== 'array') return coerceScalar(text, schema);
  const itemSchema = (schema['items'] ?? {}) as ValueJsonSchema;
  const items = text === '' ? [] : text.split(',').map((item) => item.trim());
  const values: unknown[] = [];
  for (const item of items) {
    const coerced = coerceScalar(item, itemSchema);
    if (!coerced.ok) return coerced;
    values.push(coerced.value);
  }
  return { ok: true, value: values };
}
