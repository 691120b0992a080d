import { runCli } from '@kvreuse/cli';

let printed = '';
const status = await runCli(['config', 'show', '--json', '--discovery-backend', 'memory'], {
  stdout: (text) => (printed += text),
  stderr: (text) => process.stderr.write(text),
  env: {},
  cwd: process.cwd(),
});
const { settings, provenance } = JSON.parse(printed) as {
  settings: { discovery: { backend: string } };
  provenance: { discovery: { backend: { source: string } } };
};
console.log(
  JSON.stringify({ status, discoveryBackend: [settings.discovery.backend, provenance.discovery.backend.source] }),
);
