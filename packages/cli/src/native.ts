import { resolve } from 'node:path';
import type { Settings } from '@kvreuse/config';
import { type Capabilities, loadTransport } from '@kvreuse/native-bindings';

/** What the native library the settings name (`transport.library`, else the default one) can do. */
export function nativeCapabilities(settings: Settings, cwd: string): Capabilities {
  const { library } = settings.transport;
  return loadTransport(library === '' ? {} : { libraryPath: resolve(cwd, library) }).capabilities();
}
