/**
 * The UCX settings the facade runs UCX with inside Node, unless the user set them. UCX reads them once,
 * when libucs is loaded, so they are applied before the library is (see openLibrary).
 *
 * - Memory hooks off (`UCX_MEM_MALLOC_HOOKS=no`, `UCX_MEM_MMAP_HOOK_MODE=none`). By default UCX patches
 *   the code of libc's mmap, munmap, brk and sbrk at load time, in a process where V8's and libuv's
 *   threads are calling them, and reports every unmapping to its registration cache. Measured here:
 *   with the hooks, a loopback-only Node process now and then crashed in glibc's malloc during agent
 *   creation (its main heap pointing at memory that was no longer writable). kvreuse does not need
 *   them: it registers long-lived regions explicitly and deregisters them before their memory is freed,
 *   so no cached registration can outlive its memory. The C tests run with the same two settings.
 * - UCX's error handler off (`UCX_HANDLE_ERRORS=none`). Its SIGSEGV/SIGBUS/SIGILL/SIGFPE handler replaces
 *   Node's: V8's WebAssembly bounds checks, which rely on SIGSEGV, then kill the process instead of
 *   throwing a RuntimeError, and a real crash inside malloc hangs in the handler (it allocates) instead
 *   of ending with a core dump.
 */
export const UCX_DEFAULTS: Readonly<Record<string, string>> = {
  UCX_MEM_MALLOC_HOOKS: 'no',
  UCX_MEM_MMAP_HOOK_MODE: 'none',
  UCX_HANDLE_ERRORS: 'none',
};

/** Sets each of UCX_DEFAULTS in `environment` that is not already set; returns the names it set. */
export function applyUcxDefaults(environment: Record<string, string | undefined>): string[] {
  const applied: string[] = [];
  for (const [name, value] of Object.entries(UCX_DEFAULTS)) {
    if (environment[name] !== undefined) continue;
    environment[name] = value;
    applied.push(name);
  }
  return applied;
}
