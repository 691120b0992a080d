// The test engine's KV memory as an engine's host tier is when it is handed to a kvreuse sidecar: a memfd
// sealed against shrinking, mapped shared; and the engine's side of the adoption protocol, the reference
// C client of libkvreuse_transport (kvreuse_sidecar_client.h) called through koffi. The tool binds these
// few calls itself: it stands below @kvreuse/native-bindings (the engine-events tests use it).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';

const MFD_CLOEXEC = 0x1;
const MFD_ALLOW_SEALING = 0x2;
const F_ADD_SEALS = 1033;
const F_SEAL_SHRINK = 0x2;
const PROT_READ_WRITE = 0x3;
const MAP_SHARED = 0x1;

interface Libc {
  memfd_create(name: string, flags: number): number;
  ftruncate(fd: number, length: bigint): number;
  fcntl(fd: number, command: number, argument: number): number;
  mmap(address: bigint, length: bigint, protection: number, flags: number, fd: number, offset: bigint): bigint | number;
  munmap(address: bigint, length: bigint): number;
  close(fd: number): number;
}

let libc: Libc | undefined;

function bindLibc(): Libc {
  const library = koffi.load('libc.so.6');
  return {
    memfd_create: library.func('int memfd_create(const char *name, unsigned int flags)') as Libc['memfd_create'],
    ftruncate: library.func('int ftruncate(int fd, int64_t length)') as Libc['ftruncate'],
    fcntl: library.func('int fcntl(int fd, int cmd, int arg)') as Libc['fcntl'],
    mmap: library.func(
      'intptr_t mmap(uintptr_t addr, size_t length, int prot, int flags, int fd, int64_t offset)',
    ) as Libc['mmap'],
    munmap: library.func('int munmap(uintptr_t addr, size_t length)') as Libc['munmap'],
    close: library.func('int close(int fd)') as Libc['close'],
  };
}

/** `bytes` of zeroed memory in a new memfd named "kvreuse-bank", sealed against shrinking, mapped shared. */
export class EngineMemory {
  readonly fd: number;
  readonly view: Buffer;
  readonly #address: bigint;

  constructor(bytes: number) {
    const c = (libc ??= bindLibc());
    this.fd = c.memfd_create('kvreuse-bank', MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (this.fd < 0) throw new Error(`memfd_create failed with errno ${koffi.errno()}`);
    if (c.ftruncate(this.fd, BigInt(bytes)) !== 0 || c.fcntl(this.fd, F_ADD_SEALS, F_SEAL_SHRINK) !== 0) {
      c.close(this.fd);
      throw new Error(`sizing and sealing the memfd failed with errno ${koffi.errno()}`);
    }
    this.#address = BigInt(c.mmap(0n, BigInt(bytes), PROT_READ_WRITE, MAP_SHARED, this.fd, 0n));
    if (this.#address === -1n) {
      c.close(this.fd);
      throw new Error(`mmap of the memfd failed with errno ${koffi.errno()}`);
    }
    this.view = Buffer.from(koffi.view(this.#address, bytes));
  }

  close(): void {
    const c = libc as Libc;
    c.munmap(this.#address, BigInt(this.view.length));
    c.close(this.fd);
  }
}

interface ClientApi {
  kvt_sidecar_client_connect(path: string, outSocket: Int32Array): number;
  kvt_sidecar_client_send(
    socket: number,
    data: Uint8Array,
    length: number,
    fds: Int32Array | null,
    count: number,
  ): number;
  kvt_sidecar_client_adopt(
    socket: number,
    memfd: number,
    layout: string,
    answer: Uint8Array,
    capacity: number,
    timeoutMs: number,
  ): number;
  kvt_sidecar_client_close(socket: number): number;
  kvt_last_error_detail(): string;
}

let client: ClientApi | undefined;

/** The repository's native build (`make -C native`): this tool runs from a kvreuse checkout. */
function bindClient(): ClientApi {
  const path = fileURLToPath(new URL('../../../native/build/libkvreuse_transport.so', import.meta.url));
  if (!existsSync(path)) throw new Error(`${path} is not built: run make -C native`);
  const library = koffi.load(path);
  const prototypes: Record<keyof ClientApi, string> = {
    kvt_sidecar_client_connect: 'int32_t kvt_sidecar_client_connect(const char *path, int32_t *out_socket)',
    kvt_sidecar_client_send:
      'int32_t kvt_sidecar_client_send(int32_t socket, const uint8_t *data, uint32_t length, const int32_t *fds, uint32_t fd_count)',
    kvt_sidecar_client_adopt:
      'int32_t kvt_sidecar_client_adopt(int32_t socket, int32_t memfd, const char *layout_json, char *answer, uint32_t capacity, uint32_t timeout_ms)',
    kvt_sidecar_client_close: 'int32_t kvt_sidecar_client_close(int32_t socket)',
    kvt_last_error_detail: 'const char *kvt_last_error_detail(void)',
  };
  const api = Object.fromEntries(
    Object.entries(prototypes).map(([name, prototype]) => [name, library.func(prototype)]),
  );
  return api as unknown as ClientApi;
}

/** An engine's connection to a kvreuse sidecar. */
export class SidecarConnection {
  readonly #api: ClientApi;
  readonly #socket: number;

  constructor(path: string) {
    this.#api = client ??= bindClient();
    const socket = new Int32Array(1);
    this.#check(this.#api.kvt_sidecar_client_connect(path, socket), 'connect');
    this.#socket = socket[0] as number;
  }

  /** Hands over `memfd` with `layout`; returns the `adopted` answer or throws the refusal. */
  adopt(memfd: number, layout: object, timeoutMs = 60_000): Record<string, unknown> {
    const answer = new Uint8Array(65536);
    this.#check(
      this.#api.kvt_sidecar_client_adopt(this.#socket, memfd, JSON.stringify(layout), answer, answer.length, timeoutMs),
      'adopt',
    );
    return JSON.parse(Buffer.from(answer).toString('utf8', 0, answer.indexOf(0))) as Record<string, unknown>;
  }

  send(message: object): void {
    const bytes = Buffer.from(JSON.stringify(message), 'utf8');
    this.#check(this.#api.kvt_sidecar_client_send(this.#socket, bytes, bytes.length, null, 0), 'send');
  }

  close(): void {
    this.#api.kvt_sidecar_client_close(this.#socket);
  }

  #check(status: number, what: string): void {
    if (status < 0) throw new Error(`sidecar ${what} failed (${status}): ${this.#api.kvt_last_error_detail()}`);
  }
}
