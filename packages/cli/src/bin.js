#!/usr/bin/env node
// The `kvreuse` binary: the one place that reads this process's argv, environment and working directory,
// and listens for its signals.
import { interruptCleanups } from './interrupts.js';
import { runCli } from './run.js';
process.exitCode = await runCli(process.argv.slice(2), {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    env: process.env,
    cwd: process.cwd(),
    whenInterrupted: interruptCleanups(process),
});
