import { fileURLToPath } from 'node:url';

/** The bundled example settings file (`examples/kvreuse.yaml`): reuse enabled, everything else sensible. */
export const exampleSettingsPath: string = fileURLToPath(new URL('../../examples/kvreuse.yaml', import.meta.url));
