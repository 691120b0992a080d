// Runs the built `kvreuse` binary (the package's bin entry) as a child process, as a user would.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
export const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = join(packageDir, '../..');
const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
export const binPath = join(packageDir, manifest.bin.kvreuse);
export function startBinary(args, options = {}) {
    const child = spawn(process.execPath, [binPath, ...args], {
        cwd: options.cwd ?? packageDir,
        env: { PATH: process.env.PATH ?? '', ...options.env },
        stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk) => (stderr += chunk.toString()));
    const finished = new Promise((resolve, reject) => {
        child.once('error', reject);
        child.once('close', (status, signal) => resolve({ status, signal, stdout, stderr, stderrLines: stderr.split('\n').filter((line) => line !== '') }));
    });
    const stdoutLine = (pattern) => new Promise((resolve, reject) => {
        const look = () => {
            const found = stdout.split('\n').slice(0, -1).map((line) => line.match(pattern)).find((match) => match !== null);
            if (found !== undefined)
                resolve(found);
            return found !== undefined;
        };
        if (look())
            return;
        const onData = () => {
            if (look())
                child.stdout.off('data', onData);
        };
        child.stdout.on('data', onData);
        void finished.then(() => {
            if (!look())
                reject(new Error(`the binary ended without a line matching ${pattern} on stdout:\n${stdout}${stderr}`));
        }, reject);
    });
    return { child, stdoutLine, finished };
}
export function runBinary(args, options = {}) {
    return startBinary(args, options).finished;
}
