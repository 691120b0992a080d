import { resolve } from 'node:path';
import { describeProvenance } from '@kvreuse/config';
import type { ResolvedSettings } from './settings/all-settings.js';
import {
  type Capabilities,
  LibraryLoadError,
  LibraryMismatchError,
  LibraryNotFoundError,
  loadTransport,
  type Transport,
} from '@kvreuse/native-bindings';
import { InputFileError, TransportUnavailableError } from './errors.js';

/** A command's settings with where each came from, so that a library it cannot find is named by the setting that gave it. */
export type SettingsWithSources = Pick<ResolvedSettings, 'settings' | 'provenance'>;

/**
 * The native library the settings name (`transport.library`, else the default one); an `InputFileError`
 * naming the setting and where it came from when the library it names is not there.
 */
export function nativeTransport({ settings, provenance }: SettingsWithSources, cwd: string): Transport {
  const { library } = settings.transport;
  if (library === '') return loadTransport();
  const libraryPath = resolve(cwd, library);
  try {
    return loadTransport({ libraryPath });
  } catch (error) {
    if (!(error instanceof LibraryNotFoundError)) throw error;
    throw new InputFileError(
      libraryPath,
      `no such file, so no native library to load (transport.library from ${describeProvenance(provenance.transport.library)})`,
      { cause: error },
    );
  }
}

/** What the native library the settings name can do; see `nativeTransport` for one that is not there. */
export function nativeCapabilities(settings: SettingsWithSources, cwd: string): Capabilities {
  return nativeTransport(settings, cwd).capabilities();
}

/**
 * The native library, for a command that needs its UCX backend; a `TransportUnavailableError` naming
 * what is missing (the built library, or its ucx backend: not built in, or UCX's libucp.so.0 not loadable)
 * and how to get it, or the `InputFileError` of a `transport.library` that is not there.
 */
export function requireUcxTransport(command: string, settings: SettingsWithSources, cwd: string): Transport {
  let transport: Transport;
  let capabilities: Capabilities;
  try {
    transport = nativeTransport(settings, cwd);
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
export function requireUcx(command: string, settings: SettingsWithSources, cwd: string): Capabilities {
  return requireUcxTransport(command, settings, cwd).capabilities();
}
