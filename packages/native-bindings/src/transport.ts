import { SidecarClient } from './sidecar-client.js';
import { type SidecarEvent, SidecarListener } from './sidecar-listener.js';
import { Agent, type AgentOptions } from './agent.js';
import { type Backend, backendIds } from './backend.js';
import { type Counters, checkCounterNames, readCounters } from './counters.js';
import { check, openLibrary, type NativeLibrary } from './library.js';

export interface Capabilities {
  /** The library's own version string, with the backends built (e.g. "0.1.0 (loopback, ucx 1.13.1)"). */
  readonly version: string;
  /** The file that was loaded. */
  readonly libraryPath: string;
  /**
   * Backends usable in this process: `loopback` always, `ucx` when it is built in (UCX headers were
   * present at build time) and UCX's `libucp.so.0` loads (asking loads it).
   */
  readonly backends: readonly Backend[];
  /** Why `backends` holds what it holds, in the library's words (e.g. the loader's error for libucp.so.0). */
  readonly backendsDetail: string;
  /** Whether GPU memory (`vram`) can be registered, and if not, why. */
  readonly vram: { readonly supported: true } | { readonly supported: false; readonly reason: string };
  readonly limits: {
    /** Most descriptors in one `post`. */
    readonly maxDescriptors: number;
    /** Most bytes in one notification. */
    readonly maxNotificationBytes: number;
    /** Most bytes in an agent name. */
    readonly maxNameBytes: number;
    /** Most live registrations per agent. */
    readonly maxRegions: number;
    /** Received notifications queued per agent before further ones are dropped (and counted). */
    readonly maxPendingNotifications: number;
  };
}

const CAPABILITY_COUNT = 7;
const CAPABILITY_BACKENDS = 0;
const CAPABILITY_VRAM = 1;

export interface LoadTransportOptions {
  /**
   * Path of libkvreuse_transport.so. Without it the facade looks in the kvreuse repository's
   * `native/build/` (in a checkout), then in the prebuilt platform package for this machine
   * (`@kvreuse/native-linux-x64-gnu` or `-arm64-gnu`), then in the installed package's `native/build/`
   * (`kvreuse-build-native`; see README).
   */
  readonly libraryPath?: string;
}

/** The loaded native library: capabilities, process-wide counters and agent creation. */
export class Transport {
  readonly #library: NativeLibrary;

  /** @internal Use loadTransport. */
  constructor(library: NativeLibrary) {
    this.#library = library;
  }

  get libraryPath(): string {
    return this.#library.path;
  }

  capabilities(): Capabilities {
    const { api } = this.#library;
    const values = new BigUint64Array(CAPABILITY_COUNT);
    check(this.#library, 'kvt_capabilities', api.kvt_capabilities(values, CAPABILITY_COUNT, new Uint32Array(1)));
    const [backendMask = 0n, vram = 0n, maxDescriptors, maxNotification, maxName, maxRegions, maxPending] = values;
    return {
      version: api.kvt_version_string(),
      libraryPath: this.#library.path,
      backends: (Object.keys(backendIds) as Backend[]).filter(
        (backend) => (backendMask & (1n << BigInt(backendIds[backend]))) !== 0n,
      ),
      backendsDetail: api.kvt_capability_detail(CAPABILITY_BACKENDS) ?? 'not reported by the library',
      vram:
        vram === 1n
          ? { supported: true }
          : { supported: false, reason: api.kvt_capability_detail(CAPABILITY_VRAM) ?? 'not reported by the library' },
      limits: {
        maxDescriptors: Number(maxDescriptors),
        maxNotificationBytes: Number(maxNotification),
        maxNameBytes: Number(maxName),
        maxRegions: Number(maxRegions),
        maxPendingNotifications: Number(maxPending),
      },
    };
  }

  /** Counters of every agent of this process together (cumulative ones include destroyed agents). */
  counters(): Counters {
    return readCounters(this.#library, 0);
  }

  /**
   * Creates an agent and starts its native progress thread, which starts the backend (UCX: tens of
   * milliseconds) without holding the JavaScript thread; resolves once it started. Close it with
   * `agent.close()`.
   */
  createAgent(options: AgentOptions): Promise<Agent> {
    return Agent.create(this.#library, options);
  }

  /**
   * Binds an adoption sidecar's socket at `path` (it must not exist; mode 0600) and hands each engine's
   * connection, message (with its passed descriptors), refused packet and end to `onEvent`. Close it with
   * `listener.close()`, which removes the file.
   */
  listenSidecar(path: string, onEvent: (event: SidecarEvent) => void): SidecarListener {
    return new SidecarListener(this.#library, path, onEvent);
  }

  /** Connects to the sidecar listening at `path`, as an engine does (REMOTE_DISCONNECT when none listens). */
  connectSidecar(path: string): SidecarClient {
    return new SidecarClient(this.#library, path);
  }
}

/**
 * Loads libkvreuse_transport (once per path per process) and checks that it is the API this facade
 * speaks. Throws LibraryNotFoundError, LibraryLoadError or LibraryMismatchError.
 */
export function loadTransport(options: LoadTransportOptions = {}): Transport {
  const library = openLibrary(options.libraryPath);
  checkCounterNames(library);
  return new Transport(library);
}
