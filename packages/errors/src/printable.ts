/**
 * `text` with every control character (C0, DEL, C1) written as a JSON escape (`\n`, `\u001b`, `\u009b`),
 * so that a name, value or path from outside (a file, a variable, argv, the network) cannot move the
 * cursor, recolour or clear the terminal it is printed to, or break the one-line layout of a message.
 */
export function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (control) =>
    // JSON escapes C0 (`\n` short), but leaves DEL and C1 as they are.
    control < ' ' ? JSON.stringify(control).slice(1, -1) : `\\u${control.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
