// Loads the library through the facade, creates a ucx agent, and reports what UCX did to this process:
// the UCX settings in effect, whether libc's mmap was patched (a memory hook), and what a WebAssembly
// out-of-bounds load does (V8 catches it with its SIGSEGV handler, unless another handler replaced it).
import koffi from 'koffi';
import { agentName, transport } from '../support/backends.js';
import { emit } from '../support/child.js';

const agent = await transport.createAgent({ name: agentName('ucx-environment'), backend: 'ucx' });

const dlsym = koffi.load('libc.so.6').func('void *dlsym(void *handle, const char *symbol)');
const mmapEntry = new Uint8Array(koffi.view(koffi.address(dlsym(null, 'mmap')), 1));
const JMP_REL32 = 0xe9;

// (module (memory 1) (func (export "load") (param i32) (result i32) local.get 0 i32.load))
const wasm = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x03, 0x02, 0x01,
  0x00, 0x05, 0x03, 0x01, 0x00, 0x01, 0x07, 0x08, 0x01, 0x04, 0x6c, 0x6f, 0x61, 0x64, 0x00, 0x00, 0x0a, 0x09, 0x01,
  0x07, 0x00, 0x20, 0x00, 0x28, 0x02, 0x00, 0x0b,
]);
// Node has WebAssembly; the project's TypeScript lib (es2023, no DOM) does not declare it.
const webAssembly = (
  globalThis as unknown as {
    WebAssembly: { instantiate(bytes: Uint8Array): Promise<{ instance: { exports: Record<string, unknown> } }> };
  }
).WebAssembly;
const load = (await webAssembly.instantiate(wasm)).instance.exports['load'] as (address: number) => number;
let outOfBounds: string;
try {
  outOfBounds = `returned ${load(1 << 20)}`;
} catch (error) {
  outOfBounds = String(error);
}

await agent.close();
emit({
  event: 'report',
  settings: Object.fromEntries(
    ['UCX_MEM_MALLOC_HOOKS', 'UCX_MEM_MMAP_HOOK_MODE', 'UCX_HANDLE_ERRORS'].map((name) => [name, process.env[name]]),
  ),
  mmapPatched: mmapEntry[0] === JMP_REL32,
  outOfBounds,
});
