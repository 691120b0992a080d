import { isSettingsError } from '@kvreuse/config';
/** Every problem a settings error lists, one per line (`router.x = 0 in file k.yaml:3: …`). */
export function problemLines(error) {
    const [head = '', ...items] = error.message.split('\n');
    return items.length === 0 ? [head] : items.map((item) => item.replace(/^\s*- /, ''));
}
/** An error's message on one line: a settings error's list joined after its headline. */
export function oneLine(error) {
    const message = error instanceof Error ? error.message : String(error);
    if (isSettingsError(error)) {
        const [head = ''] = error.message.split('\n');
        const items = problemLines(error);
        return items.length === 1 && items[0] === head ? head : `${head} ${items.join('; ')}`;
    }
    return message.replace(/\s+/g, ' ').trim();
}
