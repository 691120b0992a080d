// `npm run demo`: the main job, reading KVREUSE_* settings from this process's environment and argv.
import { isSettingsError } from '@kvreuse/config';
import { runMainJob } from './main-job.js';

try {
  process.stdout.write(runMainJob({ env: process.env, argv: process.argv.slice(2) }));
} catch (error) {
  if (!isSettingsError(error)) throw error;
  console.error(error.message);
  process.exitCode = 2;
}
