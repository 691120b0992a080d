// The rendezvous of `kvreuse bench link`, with no discovery server: the connecting side opens a TCP
// connection to the listener's port and the two exchange one JSON line each way — the size the
// connecting side needs, then the listener's transport metadata and the region it registered for it —
// and a last line when the measurement is over. The bytes then move over UCX, not over this connection.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { z } from 'zod';
import { PeerProtocolError, PeerTimeoutError, PeerUnreachableError, UsageError } from '../errors.js';

const protocol = 'kvreuse-bench-link';
const version = 1;
/** Longest line either side accepts: the listener's metadata, base64, with room to spare. */
const maxLineBytes = 1 << 20;
/** How often a refused connection is tried again until the deadline (the listener may not be up yet). */
const retryMs = 100;

const header = { protocol: z.literal(protocol), version: z.literal(version) };
/** The connecting side's first line: the bytes the listener registers for it (its largest message). */
export const helloMessage = z.strictObject({ ...header, bytes: z.int().positive() });
/** The listener's answer: its agent's metadata (base64), the id of the region it registered, its size and fill seed. */
export const acceptMessage = z.strictObject({
  ...header,
  metadata: z.base64().min(1),
  region: z.int().nonnegative(),
  bytes: z.int().positive(),
  seed: z.int().min(0).max(255),
});
/** The listener cannot serve the hello (the size is too large for it), and says why. */
export const refuseMessage = z.strictObject({ ...header, refused: z.string() });
/** The connecting side is done with the listener's region. */
export const doneMessage = z.strictObject({ ...header, done: z.literal(true) });

export type Hello = z.infer<typeof helloMessage>;
export type Accept = z.infer<typeof acceptMessage>;

/** The listener's region holds this 251-byte pattern over and over (251 is prime: a read from a wrong offset shows). */
export function fillPattern(seed: number): Buffer {
  return Buffer.from(Array.from({ length: 251 }, (_, index) => (index * 7 + seed) & 0xff));
}

/** `body` as a line of the exchange. */
export function line(body: Record<string, unknown>): string {
  return `${JSON.stringify({ protocol, version, ...body })}\n`;
}

/** One side of the exchange: a socket read a line at a time, each line within a deadline. */
export class LineChannel {
  readonly peer: string;
  readonly #socket: Socket;
  #buffered = '';
  readonly #lines: string[] = [];
  #ended: Error | undefined;
  #wake: (() => void) | undefined;

  constructor(socket: Socket, peer: string) {
    this.peer = peer;
    this.#socket = socket;
    socket.setEncoding('utf8');
    socket.setNoDelay(true);
    socket.on('data', (chunk: string) => this.#receive(chunk));
    socket.on('end', () => this.#end(new PeerProtocolError(peer, 'closed the connection before the exchange ended')));
    socket.on('error', (error) =>
      this.#end(new PeerProtocolError(peer, `broke the connection (${error.message})`, { cause: error })),
    );
  }

  #receive(chunk: string): void {
    this.#buffered += chunk;
    for (let end = this.#buffered.indexOf('\n'); end !== -1; end = this.#buffered.indexOf('\n')) {
      this.#lines.push(this.#buffered.slice(0, end));
      this.#buffered = this.#buffered.slice(end + 1);
    }
    if (this.#buffered.length > maxLineBytes)
      this.#end(new PeerProtocolError(this.peer, `sent a line longer than ${maxLineBytes} bytes`));
    this.#wake?.();
  }

  #end(error: Error): void {
    this.#ended ??= error;
    this.#wake?.();
  }

  /** The next line, read as `schema` says; `what` names it in the error when it does not come within `timeoutMs` (undefined: no limit). */
  async next<T>(schema: z.ZodType<T>, what: string, timeoutMs: number | undefined): Promise<T> {
    const text = await this.#nextLine(what, timeoutMs);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new PeerProtocolError(
        this.peer,
        `sent ${JSON.stringify(text.slice(0, 80))}, which is not kvreuse bench link's exchange`,
      );
    }
    const result = schema.safeParse(parsed);
    if (!result.success)
      throw new PeerProtocolError(
        this.peer,
        `sent a line that is not ${what} of ${protocol} version ${version}: ${result.error.issues.map((issue) => `${issue.path.join('.') || 'line'}: ${issue.message}`).join('; ')}`,
      );
    return result.data;
  }

  async #nextLine(what: string, timeoutMs: number | undefined): Promise<string> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      if (timeoutMs !== undefined)
        timer = setTimeout(() => reject(new PeerTimeoutError(this.peer, what, timeoutMs)), timeoutMs);
    });
    try {
      for (;;) {
        const next = this.#lines.shift();
        if (next !== undefined) return next;
        if (this.#ended !== undefined) throw this.#ended;
        await Promise.race([new Promise<void>((resolve) => (this.#wake = resolve)), timedOut]);
      }
    } finally {
      clearTimeout(timer);
      this.#wake = undefined;
    }
  }

  send(body: Record<string, unknown>): void {
    this.#socket.write(line(body));
  }

  /** Sends the last line and ends this side of the connection once it is written. */
  sendLast(body: Record<string, unknown>): Promise<void> {
    return new Promise((resolve) => this.#socket.end(line(body), resolve));
  }

  /** Ends the connection; nothing more is read or sent. */
  close(): void {
    this.#end(new PeerProtocolError(this.peer, 'the connection is closed'));
    this.#socket.destroy();
  }
}

function connectOnce(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (error) => {
      socket.destroy();
      reject(error);
    });
  });
}

/**
 * Connects to the listener at `host:port`, trying again while it refuses (it may be starting) until
 * `timeoutMs` has passed; `PeerUnreachableError` when it refuses to the end or cannot be reached at all.
 */
export async function connectToListener(host: string, port: number, timeoutMs: number): Promise<LineChannel> {
  const peer = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const attempt = connectOnce(host, port);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new PeerUnreachableError(peer, `no connection within ${timeoutMs / 1000} s (see --timeout)`)),
        Math.max(deadline - Date.now(), 0),
      );
    });
    try {
      return new LineChannel(await Promise.race([attempt, timedOut]), peer);
    } catch (error) {
      attempt.then(
        (socket) => socket.destroy(),
        () => undefined,
      );
      if (error instanceof PeerUnreachableError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ECONNREFUSED' || Date.now() + retryMs > deadline)
        throw new PeerUnreachableError(peer, (error as Error).message, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, retryMs));
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The listening side's server: it waits for one peer, then takes no other. */
export class LinkListener {
  readonly #server: Server;
  readonly #connected: Promise<Socket>;

  private constructor(server: Server, connected: Promise<Socket>) {
    this.#server = server;
    this.#connected = connected;
  }

  /** Listens on `address:port` (port 0: a free one); a `UsageError` naming both when it cannot (in use, not an address of this host). */
  static async open(address: string, port: number): Promise<LinkListener> {
    const server = createServer();
    const connected = new Promise<Socket>((resolve) => server.once('connection', resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen({ host: address, port, exclusive: true }, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (error) {
      server.close();
      if ((error as NodeJS.ErrnoException).code === 'EADDRNOTAVAIL')
        throw new UsageError('bench link', `--address ${JSON.stringify(address)} is not an IP address of this host`);
      throw new UsageError('bench link', `cannot listen on ${address}:${port}: ${(error as Error).message}`);
    }
    return new LinkListener(server, connected);
  }

  /** The port it listens on. */
  get port(): number {
    const bound = this.#server.address();
    return typeof bound === 'object' && bound !== null ? bound.port : 0;
  }

  /** The first peer to connect (within `timeoutMs`, when given); it then stops listening. */
  async accept(timeoutMs: number | undefined): Promise<LineChannel> {
    let timer: NodeJS.Timeout | undefined;
    const waited =
      timeoutMs === undefined
        ? this.#connected
        : Promise.race([
            this.#connected,
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new PeerTimeoutError('any peer', 'a connection', timeoutMs)), timeoutMs);
            }),
          ]);
    try {
      const socket = await waited;
      this.#server.close();
      return new LineChannel(socket, `${socket.remoteAddress}:${socket.remotePort}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops listening (a connection already accepted stays open). */
  close(): void {
    this.#server.close();
  }
}
