import { resolve } from 'node:path';
import type { Settings } from './settings/all-settings.js';
import {
  type Capabilities,
  LibraryLoadError,
  LibraryMismatchError,
  LibraryNotFoundError,
  loadTransport,
  type Transport,
} from '@kvreuse/native-bindings';
import { TransportUnavailableError } from './errors.js';

/** The native library the settings name (`transport.library`, else the default one). */
function transportOf(settings: Settings, cwd: string): Transport {
  const { library } = settings.transport;
  return loadTransport(library === '' ? {} : { libraryPath: resolve(cwd, library) });
}

/** What the native library the settings name can do. */
export function nativeCapabilities(settings: Settings, cwd: string): Capabilities {
  return transportOf(settings, cwd).capabilities();
}

/**
 * The native library, for a command that needs its UCX backend; a `TransportUnavailableError` naming
 * what is missing (the library, or its ucx backend: not built in, or UCX's libucp.so.0 not loadable)
 * and how to get it.
 */
export function requireUcxTransport(command: string, settings: Settings, cwd: string): Transport {
  let transport: Transport;
  let capabilities: Capabilities;
  try {
    transport = transportOf(settings, cwd);
    capabilities = transport.capabilities();
  } catch (error) {
    if (error instanceof LibraryNotFoundError) {
      throw new TransportUnavailableError(
        command,
        `the native library libkvreuse_transport is not at ${error.searched.map((path) => JSON.stringify(path)).join(' or ')}`,
        { cause: error },
      );
    }
    if (error instanceof LibraryLoadError || error instanceof LibraryMismatchError) {
      throw new TransportUnavailableError(
        command,
        `the native library ${JSON.stringify(error.path)} does not load (${error.message})`,
        { cause: error },
      );
    }
    throw error;
  }
  if (!capabilities.backends.includes('ucx')) {
    throw new TransportUnavailableError(
      command,
      `the native library ${JSON.stringify(capabilities.libraryPath)} has no ucx backend here (${capabilities.backendsDetail})`,
    );
  }
  return transport;
}

/** The capabilities of the native library, for a command that needs its UCX backend (see `requireUcxTransport`). */
export function requireUcx(command: string, settings: Settings, cwd: string): Capabilities {
  return requireUcxTransport(command, settings, cwd).capabilities();
}
