import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { spawnScript } from './child.js';
import { namespaceTestsRun, openVethPair } from './netns.js';

function namespaces(): string[] {
  return spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .stdout.split('\n')
    .map((line) => line.split(' ')[0] ?? '')
    .filter((name) => name !== '');
}

function expectRemoved(names: readonly string[]): void {
  const left = namespaces();
  for (const name of names) expect(left).not.toContain(name);
}

function inNamespace(name: string, command: string[]): string {
  return spawnSync('ip', ['netns', 'exec', name, ...command], { encoding: 'utf8' }).stdout;
}

describe.runIf(namespaceTestsRun)('two network namespaces joined by a veth pair', () => {
  it('gives each end its address with the link up; close removes both namespaces, and closing again does nothing', () => {
    const pair = openVethPair();
    try {
      expect(namespaces()).toEqual(expect.arrayContaining([pair.a.name, pair.b.name]));
      for (const end of [pair.a, pair.b]) {
        const link = inNamespace(end.name, ['ip', '-o', '-4', 'address', 'show', 'dev', pair.device]);
        expect(link).toContain(`inet ${end.address}/30`);
        expect(inNamespace(end.name, ['ip', '-o', 'link', 'show', 'dev', pair.device])).toMatch(/\bstate UP\b/);
      }
    } finally {
      pair.close();
    }
    expectRemoved([pair.a.name, pair.b.name]);
    expect(() => pair.close()).not.toThrow();
  });

  it('removes the namespaces a process still held when it exited', async () => {
    const holder = spawnScript('test/netns/holder.ts');
    const { names } = await holder.next<{ names: string[] }>('opened');
    expect(namespaces()).toEqual(expect.arrayContaining(names));
    holder.send({ command: 'exit' });
    expect(await holder.exited).toBe(0);
    expectRemoved(names);
  });

  it('removes, when the next pair is opened, the namespaces of a process that was killed', async () => {
    const holder = spawnScript('test/netns/holder.ts');
    const { names } = await holder.next<{ names: string[] }>('opened');
    expect(namespaces()).toEqual(expect.arrayContaining(names));
    holder.process.kill('SIGKILL');
    await holder.exited;
    // Another test process opening a pair meanwhile may be the one that removes them: the same sweep.
    const pair = openVethPair();
    pair.close();
    expectRemoved(names);
  });
});
