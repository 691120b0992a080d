#!/usr/bin/env node
// The `kvreuse` binary: the one place that reads this process's argv, environment and working directory,
// and listens for its signals and for its output's reader going away.
import { interruptCleanups } from './interrupts.js';
import { runCli } from './run.js';

const interrupts = interruptCleanups(process);
let readerGone = false;
// A reader that goes away (`kvreuse … | head`) ends the command as SIGPIPE ends other tools: quietly,
// once what the command started is undone, and with nothing more written.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    readerGone = true;
    interrupts.brokenPipe();
  });
}
const writeTo =
  (stream: NodeJS.WriteStream) =>
  (text: string): void => {
    if (!readerGone) stream.write(text);
  };

process.exitCode = await runCli(process.argv.slice(2), {
  stdout: writeTo(process.stdout),
  stderr: writeTo(process.stderr),
  env: process.env,
  cwd: process.cwd(),
  whenInterrupted: interrupts,
  nextSignal: interrupts.nextSignal,
});
