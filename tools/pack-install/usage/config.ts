import { defineSettings, discoveryGroup, transportGroup } from '@kvreuse/config';

// An environment and a command line of its own, so that nothing of this process's leaks in.
const { settings, provenance } = defineSettings([discoveryGroup, transportGroup]).resolve({
  env: { KVREUSE_DISCOVERY_BACKEND: 'memory' },
  argv: ['--transport-heartbeat-interval-ms', '250'],
});
console.log(
  JSON.stringify({
    discoveryBackend: [settings.discovery.backend, provenance.discovery.backend.source],
    heartbeatIntervalMs: [settings.transport.heartbeatIntervalMs, provenance.transport.heartbeatIntervalMs.source],
  }),
);
