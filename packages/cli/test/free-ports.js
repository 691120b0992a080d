// Ports for tests that serve on fixed ones: asked of the system, so that no two tests pick the same.
import { createServer } from 'node:net';
/** Whether nothing listens on `port` of 127.0.0.1 now. */
export function portIsFree(port) {
    return new Promise((resolve) => {
        const server = createServer();
        server.once('error', () => resolve(false));
        server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
}
/** A port the system hands out, free together with the next `count − 1` ones. */
export async function freePorts(count) {
    for (;;) {
        const first = await new Promise((resolve) => {
            const server = createServer().listen(0, '127.0.0.1', () => {
                const { port } = server.address();
                server.close(() => resolve(port));
            });
        });
        const rest = Array.from({ length: count - 1 }, (_, i) => first + 1 + i);
        if (rest.every((port) => port <= 65_535) && (await Promise.all(rest.map(portIsFree))).every(Boolean))
            return first;
    }
}
