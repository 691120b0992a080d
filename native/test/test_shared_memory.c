/* Shared memory for kvt_mem_alloc on UCX: refused when neither SysV shared memory nor UCX's posix directory (/dev/shm,
 * or UCX_POSIX_DIR) can hold an allocation, each counted only where UCX_TLS leaves its transport in, the detail saying
 * what each had or why it could not be asked. */
#include "harness.h"

#include "services/mapping.h"
#ifdef KVT_HAVE_UCX
#include "backends/ucx/ucx_tls.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define SMALL_SHM_OPTIONS "size=24m"
/* /dev/shm in the child while UCX_POSIX_DIR names the small tmpfs: room for the 64 MiB, whatever the host's is */
#define LARGE_SHM_OPTIONS "size=128m"
#define SMALL_POSIX_DIR "/dev/shm/posix"
/* kernel.shmmax of the child's IPC namespace: SysV refuses anything larger (UCX's own receive pools fit) */
#define SYSV_LIMIT "8388608"
/* kernel.shmmax where SysV would have room for the 64 MiB, were it counted */
#define ROOMY_SYSV_LIMIT "134217728"
#define TOO_LARGE (64u << 20)
#define FITS_SHM_ONLY (12u << 20)

/* Where UCX's posix transport puts its segments: UCX_POSIX_DIR, /dev/shm by default. */
static const char *posix_dir(void) {
    const char *dir = getenv("UCX_POSIX_DIR");
    return dir ? dir : "/dev/shm";
}

static uint64_t free_bytes_in(const char *dir) {
    struct statvfs fs;
    CHECK(statvfs(dir, &fs) == 0, "statvfs %s: %s", dir, strerror(errno));
    return (uint64_t)fs.f_bavail * fs.f_frsize;
}
static bool mapped_from(uint64_t address, const char *needle) {
    FILE *maps = fopen("/proc/self/maps", "r");
    CHECK(maps != NULL, "open /proc/self/maps");
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, maps)) {
        unsigned long long start, end;
        if (sscanf(line, "%llx-%llx", &start, &end) == 2 && address >= start && address < end)
            found = strstr(line, needle) != NULL;
    }
    fclose(maps);
    return found;
}

/* Bytes this process has passed to write() and its kin (/proc/self/io wchar): UCX tests room in /dev/shm by writing a
 * segment's every byte. */
static uint64_t bytes_written(void) {
    FILE *io = fopen("/proc/self/io", "r");
    CHECK(io != NULL, "open /proc/self/io: %s", strerror(errno));
    unsigned long long written = 0;
    char line[128];
    while (fgets(line, sizeof line, io))
        if (sscanf(line, "wchar: %llu", &written) == 1) break;
    fclose(io);
    return written;
}

/* Whether this process is a child run_in_small_shm made; the cases it runs are skipped anywhere else. */
static bool in_small_shm(void) {
    if (getenv("KVT_TEST_IN_SMALL_SHM")) return true;
    test_skip_reason = "runs inside the namespaces run_in_small_shm makes";
    return false;
}

/* Inside the namespaces run_in_small_shm makes: UCX's posix directory is a 24 MiB tmpfs and SysV shared memory
 * takes at most 8 MiB, so a 64 MiB allocation has no shared memory to go to. */
static void allocation_in_a_small_shm(void) {
    if (!in_small_shm()) return;
    const char *dir = posix_dir();
    uint32_t agent = make_agent("small-shm");
    uint64_t room = free_bytes_in(dir), address = 0;
    CHECK(room < TOO_LARGE && room >= FITS_SHM_ONLY, "%s is the small tmpfs (%llu bytes free)", dir,
          (unsigned long long)room);
    /* Refused before any of it is written into the directory (filling it would press every process's memory). */
    uint64_t written = bytes_written();
    CHECK_STATUS(KVT_ERR_NO_MEMORY, kvt_mem_alloc(agent, TOO_LARGE, 0, &address));
    CHECK(bytes_written() - written < (1u << 20), "the refusal wrote %llu bytes first",
          (unsigned long long)(bytes_written() - written));
    CHECK_DETAIL("67108864 bytes");
    char expected[128];
    snprintf(expected, sizeof expected, "%s has %llu bytes free", dir, (unsigned long long)room);
    CHECK_DETAIL(expected);
    CHECK_DETAIL("SysV shared memory takes at most " SYSV_LIMIT " bytes");
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0 && counter(agent, KVT_COUNTER_ALLOCATED_BYTES) == 0,
          "the refusal left no allocation");
    CHECK(free_bytes_in(dir) == room, "the refusal left nothing in %s (%llu bytes free, %llu before)", dir,
          (unsigned long long)free_bytes_in(dir), (unsigned long long)room);

    /* Begun off the calling thread: refused at once too, before UCX is asked, with nothing left behind. */
    uint64_t job = 0;
    written = bytes_written();
    CHECK_STATUS(KVT_ERR_NO_MEMORY, kvt_mem_alloc_begin(agent, TOO_LARGE, 0, &address, &job));
    CHECK(bytes_written() - written < (1u << 20), "the refusal wrote %llu bytes first",
          (unsigned long long)(bytes_written() - written));
    CHECK_DETAIL(expected);
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0 && counter(agent, KVT_COUNTER_ALLOCATED_BYTES) == 0,
          "the refusal left no allocation");
    CHECK(free_bytes_in(dir) == room, "the refusal left nothing in %s (%llu bytes free, %llu before)", dir,
          (unsigned long long)free_bytes_in(dir), (unsigned long long)room);

    /* The agent goes on: 12 MiB fits in the directory (too large for SysV here), and is backed there at once. */
    CHECK_OK(kvt_mem_alloc(agent, FITS_SHM_ONLY, 0, &address));
    char segment[128];
    snprintf(segment, sizeof segment, "%s/ucx_shm_posix_", dir);
    CHECK(mapped_from(address, segment), "the 12 MiB allocation is a segment in %s", dir);
    CHECK(free_bytes_in(dir) == room - FITS_SHM_ONLY, "its pages are in %s (%llu bytes free)", dir,
          (unsigned long long)free_bytes_in(dir));
    memset((void *)(uintptr_t)address, 0x5A, FITS_SHM_ONLY);
    CHECK_OK(kvt_mem_free(agent, address));
    CHECK_OK(kvt_agent_destroy(agent));
}

/* Inside the namespaces run_in_small_shm makes where a limit cannot be asked: 64 MiB is refused before UCX writes
 * anything, the detail saying which limit (KVT_TEST_EXPECTED). */
static void allocation_with_a_limit_unasked(void) {
    if (!in_small_shm()) return;
    const char *refusal = getenv("KVT_TEST_EXPECTED");
    CHECK(refusal != NULL, "run_in_small_shm names the refusal in KVT_TEST_EXPECTED");
    uint32_t agent = make_agent("unasked-shm");
    uint64_t address = 0, written = bytes_written();
    CHECK_STATUS(KVT_ERR_NO_MEMORY, kvt_mem_alloc(agent, TOO_LARGE, 0, &address));
    CHECK(bytes_written() - written < (1u << 20), "the refusal wrote %llu bytes first",
          (unsigned long long)(bytes_written() - written));
    CHECK_DETAIL("67108864 bytes");
    CHECK_DETAIL(refusal);
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0 && counter(agent, KVT_COUNTER_ALLOCATED_BYTES) == 0,
          "the refusal left no allocation");
    CHECK_OK(kvt_agent_destroy(agent));
}

/* Inside the namespaces run_in_small_shm makes, UCX_TLS leaving sysv out: only UCX's posix directory is counted, so
 * 64 MiB, more than its 24 MiB, is refused before UCX writes the directory full to find that out, however much room
 * SysV shared memory has (kernel.shmmax is above 64 MiB here, or SysV IPC is refused). */
static void allocation_in_posix_alone(void) {
    if (!in_small_shm()) return;
    const char *dir = posix_dir();
    uint32_t agent = make_agent("posix-alone");
    uint64_t room = free_bytes_in(dir), address = 0;
    CHECK(room < TOO_LARGE, "%s is the small tmpfs (%llu bytes free)", dir, (unsigned long long)room);
    uint64_t written = bytes_written();
    CHECK_STATUS(KVT_ERR_NO_MEMORY, kvt_mem_alloc(agent, TOO_LARGE, 0, &address));
    CHECK(bytes_written() - written < (1u << 20), "the refusal wrote %llu bytes into %s first",
          (unsigned long long)(bytes_written() - written), dir);
    CHECK(free_bytes_in(dir) == room, "the refusal left nothing in %s (%llu bytes free, %llu before)", dir,
          (unsigned long long)free_bytes_in(dir), (unsigned long long)room);
    CHECK_DETAIL("67108864 bytes");
    char expected[160];
    snprintf(expected, sizeof expected, "%s has %llu bytes free (UCX_TLS leaves sysv out)", dir,
             (unsigned long long)room);
    CHECK_DETAIL(expected);
    CHECK(strstr(kvt_last_error_detail(), "SysV shared memory") == NULL, "the detail '%s' counts SysV shared memory",
          kvt_last_error_detail());
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0 && counter(agent, KVT_COUNTER_ALLOCATED_BYTES) == 0,
          "the refusal left no allocation");
    CHECK_OK(kvt_agent_destroy(agent));
}

/* Takes every SysV segment id this IPC namespace allows (kernel.shmmni): SysV then refuses any new segment, however
 * much room its limits have. */
static void take_every_sysv_segment_id(void) {
    struct shm_info usage;
    CHECK(shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&usage) >= 0, "shmctl(SHM_INFO): %s", strerror(errno));
    char ids[32];
    int ids_length = snprintf(ids, sizeof ids, "%d", usage.used_ids);
    int fd = open("/proc/sys/kernel/shmmni", O_WRONLY);
    CHECK(fd >= 0 && write(fd, ids, (size_t)ids_length) == ids_length, "set kernel.shmmni to %s: %s", ids,
          strerror(errno));
    close(fd);
}

/* Inside the namespaces run_in_small_shm makes, UCX_TLS leaving posix out: with every SysV segment id this IPC
 * namespace allows (kernel.shmmni) taken, SysV refuses 1 MiB that its limits have room for and UCX falls back to
 * private memory. The refusal says that SysV refused it and that UCX_TLS leaves posix out, not what the posix
 * directory has, which UCX never tried. */
static void private_fallback_when_sysv_refuses(void) {
    if (!in_small_shm()) return;
    uint32_t agent = make_agent("sysv-refuses");
    take_every_sysv_segment_id();
    uint64_t address = 0;
    CHECK_STATUS(KVT_ERR_NO_MEMORY, kvt_mem_alloc(agent, 1u << 20, 0, &address));
    CHECK_DETAIL("no shared memory for 1048576 bytes: SysV shared memory refused it (UCX_TLS leaves posix out), so UCX "
                 "fell back to private memory");
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0, "the refusal left no allocation");
    CHECK_OK(kvt_agent_destroy(agent));
}

/* The SysV room that ROOMY_SYSV_LIMIT leaves, as the details below say it, where UCX_TLS leaves posix out. */
#define ROOMY_SYSV_ALONE "SysV shared memory takes at most " ROOMY_SYSV_LIMIT " bytes (UCX_TLS leaves posix out)"

/* `agent` (then destroyed) is refused 1 MiB with a detail that says `what_failed` and counts SysV shared memory alone:
 * nothing of UCX's posix directory, which UCX_TLS leaves out. */
static void refused_counting_sysv_alone(uint32_t agent, const char *what_failed) {
    uint64_t address = 0;
    CHECK_STATUS(KVT_ERR_NO_MEMORY, kvt_mem_alloc(agent, 1u << 20, 0, &address));
    CHECK_DETAIL(what_failed);
    CHECK_DETAIL(ROOMY_SYSV_ALONE);
    CHECK(strstr(kvt_last_error_detail(), posix_dir()) == NULL, "the detail '%s' names %s, which UCX never tried",
          kvt_last_error_detail(), posix_dir());
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0, "the refusal left no allocation");
    CHECK_OK(kvt_agent_destroy(agent));
}

/* Inside the namespaces run_in_small_shm makes, UCX_TLS leaving posix out and UCX allocating from SysV alone
 * (UCX_ALLOC_PRIO=md:sysv): with every SysV segment id taken, ucp_mem_map fails, and its detail says what SysV shared
 * memory has room for, not what the posix directory has. */
static void mem_map_failure_when_sysv_refuses(void) {
    if (!in_small_shm()) return;
    setenv("UCX_ALLOC_PRIO", "md:sysv", 1);
    uint32_t agent = make_agent("sysv-mem-map");
    unsetenv("UCX_ALLOC_PRIO");
    take_every_sysv_segment_id();
    refused_counting_sysv_alone(agent, "ucp_mem_map(ALLOCATE, 1048576 bytes) failed");
}

/* The architecture seccomp names this build's system calls by; the filter below knows no other. */
#if defined(__x86_64__)
#define AUDIT_ARCH_NATIVE AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_NATIVE AUDIT_ARCH_AARCH64
#endif

#ifdef AUDIT_ARCH_NATIVE
/* Puts this process, for the rest of its life, under a seccomp filter that kills it at a call of another architecture
 * and else runs `rules` (at most 12, ending in a return) with the call's number loaded. */
static bool install_filter(const struct sock_filter *rules, size_t count) {
    struct sock_filter program[16] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_NATIVE, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    };
    size_t prologue = 4;
    if (count > sizeof program / sizeof program[0] - prologue) return false;
    memcpy(program + prologue, rules, count * sizeof *rules);
    struct sock_fprog filter = {.len = (unsigned short)(prologue + count), .filter = program};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter) == 0;
}

/* As on a kernel without SysV IPC: shmget, shmat, shmdt and shmctl fail with ENOSYS, every other call goes on. */
static bool refuse_sysv_shared_memory(void) {
    /* One rule a line: each jump counts the rules it skips. */
    // clang-format off
    static const struct sock_filter rules[] = {
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_shmget, 4, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_shmat, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_shmdt, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_shmctl, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    };
    // clang-format on
    return install_filter(rules, sizeof rules / sizeof rules[0]);
}

/* As where the system cannot back memory: madvise(MADV_POPULATE_WRITE) fails with ENOMEM, every other call goes on. */
static bool refuse_prefaulting(void) {
    static const struct sock_filter rules[] = {
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])), /* the advice (its low half) */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_POPULATE_WRITE, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOMEM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    return install_filter(rules, sizeof rules / sizeof rules[0]);
}
#endif

/* Inside the namespaces run_in_small_shm makes, UCX_TLS leaving posix out, where prefaulting fails (a seccomp filter
 * fails madvise(MADV_POPULATE_WRITE) with ENOMEM): the allocation UCX placed in SysV shared memory is refused, its
 * detail saying what SysV shared memory has room for, not what the posix directory has. */
static void prefault_failure_in_sysv_alone(void) {
    if (!in_small_shm()) return;
#ifndef AUDIT_ARCH_NATIVE
    test_skip_reason = "the seccomp filter that refuses prefaulting knows the system calls of x86_64 and aarch64 only";
#else
    CHECK(refuse_prefaulting(), "seccomp: %s", strerror(errno));
    refused_counting_sysv_alone(make_agent("sysv-prefault"), "the system cannot back 1048576 bytes (/SYSV");
#endif
}

typedef struct {
    const char *small_dir;   /* the 24 MiB tmpfs: /dev/shm, or a directory in a 128 MiB /dev/shm */
    const char *ucx_setting; /* one more "UCX_…=…" in the child's environment, or NULL */
    bool without_sysv;       /* SysV IPC calls fail with ENOSYS in the child */
    const char *sysv_limit;  /* kernel.shmmax in the child: SYSV_LIMIT or ROOMY_SYSV_LIMIT */
    const char *child_case;  /* the case the child runs (one that runs only there) */
    const char *expected;    /* KVT_TEST_EXPECTED: what the child case expects (its comment says what), or NULL */
} small_shm;

/* Runs `child_case` in a child process this test puts into a new mount and IPC namespace (as `unshare --mount --ipc`
 * would), kernel.shmmax at `sysv_limit` there and a 24 MiB tmpfs over `small_dir`: /dev/shm, or a directory inside a
 * larger /dev/shm that UCX_POSIX_DIR names. */
static void run_in_small_shm(small_shm setup) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend allocates private memory, not shared memory");
    const char *small_dir = setup.small_dir;
    bool own_dir = strcmp(small_dir, "/dev/shm") != 0;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
    self[n] = '\0';
    size_t count = 0;
    while (environ[count]) count++;
    char **env = calloc(count + 4, sizeof *env);
    CHECK(env != NULL, "out of memory");
    memcpy(env, environ, count * sizeof *env);
    char expected_setting[256];
    snprintf(expected_setting, sizeof expected_setting, "KVT_TEST_EXPECTED=%s", setup.expected ? setup.expected : "");
    size_t at = count;
    env[at++] = "KVT_TEST_IN_SMALL_SHM=1";
    if (setup.ucx_setting) env[at++] = (char *)setup.ucx_setting;
    if (setup.expected) env[at++] = expected_setting;
    char *const args[] = {self, "--case", (char *)setup.child_case, NULL};
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) {
        if (unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0) _exit(77);
        if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0) _exit(78);
        if (own_dir && (mount("tmpfs", "/dev/shm", "tmpfs", 0, LARGE_SHM_OPTIONS) != 0 || mkdir(small_dir, 0700) != 0))
            _exit(78);
        if (mount("tmpfs", small_dir, "tmpfs", 0, SMALL_SHM_OPTIONS) != 0) _exit(78);
        int fd = open("/proc/sys/kernel/shmmax", O_WRONLY);
        ssize_t limit_length = (ssize_t)strlen(setup.sysv_limit);
        if (fd < 0 || write(fd, setup.sysv_limit, (size_t)limit_length) != limit_length) _exit(79);
        close(fd);
#ifdef AUDIT_ARCH_NATIVE
        if (setup.without_sysv && !refuse_sysv_shared_memory()) _exit(81);
#endif
        execve(self, args, env);
        _exit(80);
    }
    free(env);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child, "waitpid");
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
        test_skip_reason = "a mount and IPC namespace need CAP_SYS_ADMIN (run as root)";
        return;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the allocations in a small %s failed (exit %d, signal %d; 78: mount, 79: shmmax, 80: exec, 81: seccomp)",
          small_dir, WIFEXITED(status) ? WEXITSTATUS(status) : -1, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* A full /dev/shm (and SysV shared memory too small) is a typed refusal naming the size and /dev/shm,
 * not a SIGBUS at first touch nor a silent private fallback. */
static void full_dev_shm_is_a_typed_refusal(void) {
    run_in_small_shm((small_shm){"/dev/shm", NULL, false, SYSV_LIMIT, "allocation_in_a_small_shm", NULL});
}

/* With UCX_POSIX_DIR naming another directory, UCX's posix segments go there: the room asked before UCX is that
 * directory's, not that of /dev/shm (which has room here). */
static void full_posix_dir_is_a_typed_refusal(void) {
    run_in_small_shm((small_shm){SMALL_POSIX_DIR, "UCX_POSIX_DIR=" SMALL_POSIX_DIR, false, SYSV_LIMIT,
                                 "allocation_in_a_small_shm", NULL});
}

/* UCX_TLS=^sysv: UCX places nothing in SysV shared memory, so its room (kernel.shmmax above 64 MiB here) is not
 * counted, and 64 MiB is refused for the small /dev/shm alone instead of UCX writing it full first. */
static void sysv_left_out_counts_the_posix_dir_alone(void) {
    run_in_small_shm(
        (small_shm){"/dev/shm", "UCX_TLS=^sysv", false, ROOMY_SYSV_LIMIT, "allocation_in_posix_alone", NULL});
}

/* The same where UCX_TLS lists its transports and sysv is not among them. */
static void sysv_unlisted_counts_the_posix_dir_alone(void) {
    run_in_small_shm(
        (small_shm){"/dev/shm", "UCX_TLS=posix,tcp,self", false, ROOMY_SYSV_LIMIT, "allocation_in_posix_alone", NULL});
}

/* Removes the folder `dir` that run_with_ucx_conf made, and its ucx.conf. */
static void remove_ucx_conf_dir(void *dir) {
    char conf[4096];
    snprintf(conf, sizeof conf, "%s/ucx.conf", (const char *)dir);
    unlink(conf);
    rmdir(dir);
}

/* Runs `setup` with UCX_CONFIG_DIR naming a directory (in $TMPDIR, else /tmp) whose ucx.conf sets UCX_TLS=`tls`
 * (setup.ucx_setting unused). The directory is removed when the case fails too. */
static void run_with_ucx_conf(const char *tls, small_shm setup) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend does not read UCX's configuration");
    const char *tmp = getenv("TMPDIR");
    char dir[2048], conf[4096], setting[4096];
    snprintf(dir, sizeof dir, "%s/kvt-ucx-conf-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
    test_on_failure(remove_ucx_conf_dir, dir);
    snprintf(conf, sizeof conf, "%s/ucx.conf", dir);
    FILE *file = fopen(conf, "w");
    CHECK(file != NULL && fprintf(file, "UCX_TLS=%s\n", tls) > 0 && fclose(file) == 0, "write %s: %s", conf,
          strerror(errno));
    snprintf(setting, sizeof setting, "UCX_CONFIG_DIR=%s", dir);
    setup.ucx_setting = setting;
    run_in_small_shm(setup);
    test_on_failure(NULL, NULL);
    remove_ucx_conf_dir(dir);
}

/* A case whose child fails (here: it reads the ucx.conf's UCX_TLS, ^sysv, where posix is expected) leaves no ucx.conf
 * folder behind. */
static void ucx_conf_dir_is_removed_when_the_child_fails(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend does not read UCX's configuration");
    char parent[] = "/tmp/kvt-ucx-conf-parent-XXXXXX";
    CHECK(mkdtemp(parent) != NULL, "mkdtemp: %s", strerror(errno));
    fflush(NULL);
    pid_t subject = fork();
    CHECK(subject >= 0, "fork");
    if (subject == 0) {
        setenv("TMPDIR", parent, 1);
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, STDERR_FILENO) < 0) _exit(2); /* the FAIL line it prints is the one expected */
        run_with_ucx_conf("^sysv",
                          (small_shm){"/dev/shm", NULL, false, ROOMY_SYSV_LIMIT, "ucx_conf_tls_as_read", "posix"});
        _exit(test_skip_reason ? 77 : 0);
    }
    int status = 0;
    CHECK(waitpid(subject, &status, 0) == subject, "waitpid");
    DIR *listing = opendir(parent);
    CHECK(listing != NULL, "opendir %s: %s", parent, strerror(errno));
    char left[512] = "";
    for (struct dirent *entry; (entry = readdir(listing)) != NULL;) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", parent, entry->d_name);
        remove_ucx_conf_dir(path);
        snprintf(left, sizeof left, "%s", entry->d_name);
    }
    closedir(listing);
    rmdir(parent);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
        test_skip_reason = "a mount and IPC namespace need CAP_SYS_ADMIN (run as root)";
        return;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1, "the child's failure did not fail the case (status 0x%x)",
          status);
    CHECK(left[0] == '\0', "the failed case left %s/%s behind", parent, left);
}

/* The same where UCX_TLS=^sysv comes from a ucx.conf, not the environment: UCX 1.13 reads it there, and so does the
 * room check. */
static void sysv_left_out_by_ucx_conf_counts_the_posix_dir_alone(void) {
    run_with_ucx_conf("^sysv",
                      (small_shm){"/dev/shm", NULL, false, ROOMY_SYSV_LIMIT, "allocation_in_posix_alone", NULL});
}

/* Without SysV IPC, UCX has no SysV segments either (its sysv transport fails the worker, so UCX_TLS leaves it out):
 * the posix directory alone is counted, and the refusal says UCX_TLS leaves sysv out. */
static void without_sysv_ipc_the_posix_dir_alone_counts(void) {
#ifndef AUDIT_ARCH_NATIVE
    test_skip_reason = "the seccomp filter that refuses SysV IPC knows the system calls of x86_64 and aarch64 only";
    return;
#endif
    run_in_small_shm((small_shm){"/dev/shm", "UCX_TLS=^sysv", true, SYSV_LIMIT, "allocation_in_posix_alone", NULL});
}

/* SysV limits that cannot be asked (here a seccomp filter fails shmctl with ENOSYS) count as no room, not as unlimited
 * room: asked in a child process, as the filter stays for the life of the process. */
static void unaskable_sysv_limits_are_no_room(void) {
#ifndef AUDIT_ARCH_NATIVE
    test_skip_reason = "the seccomp filter that refuses SysV IPC knows the system calls of x86_64 and aarch64 only";
    return;
#else
    static const char expected[] = "SysV shared memory could not be asked for its limits (shmctl: Function not "
                                   "implemented) (UCX_TLS leaves posix out)";
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) {
        if (!refuse_sysv_shared_memory()) _exit(81);
        char why[512];
        bool room = kvt_shared_memory_room(4096, (kvt_shared_memory_kinds){.sysv = true}, why, sizeof why);
        if (room || strcmp(why, expected) != 0) {
            fprintf(stderr, "room %d, detail '%s'\n", room, room ? "" : why);
            _exit(1);
        }
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the room check without SysV IPC did not refuse with '%s' (exit %d; 81: seccomp; its detail above)", expected,
          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
#endif
}

/* A UCX_POSIX_DIR statvfs cannot ask is one UCX 1.13 leaves its posix transport out for ("could not stat shared
 * memory device"): no room there either. */
static void unaskable_posix_dir_is_no_room(void) {
    run_in_small_shm(
        (small_shm){"/dev/shm", "UCX_POSIX_DIR=/dev/shm/missing", false, SYSV_LIMIT, "allocation_with_a_limit_unasked",
                    "/dev/shm/missing could not be asked for its free bytes (statvfs: No such file or directory)"});
}

/* UCX_TLS leaves sysv out and statvfs cannot ask UCX_POSIX_DIR: UCX has no shared memory to place even 1 MiB in, so it
 * is refused before UCX is asked (not counted on SysV's limits, left to fall back to private memory), the detail
 * saying that the directory could not be asked and that UCX_TLS leaves sysv out. */
static void unaskable_posix_dir_without_sysv_is_no_room(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend allocates private memory, not shared memory");
    setenv("UCX_TLS", "^sysv", 1);
    setenv("UCX_POSIX_DIR", "/dev/shm/missing", 1);
    uint32_t agent = make_agent("no-shared-memory");
    uint64_t address = 0;
    kvt_status status = kvt_mem_alloc(agent, 1u << 20, 0, &address);
    unsetenv("UCX_POSIX_DIR");
    unsetenv("UCX_TLS");
    CHECK_STATUS(KVT_ERR_NO_MEMORY, status);
    CHECK_DETAIL("no shared memory for 1048576 bytes: /dev/shm/missing could not be asked for its free bytes (statvfs: "
                 "No such file or directory) (UCX_TLS leaves sysv out)");
    CHECK(counter(agent, KVT_COUNTER_LIVE_ALLOCATIONS) == 0, "the refusal left no allocation");
    CHECK_OK(kvt_agent_destroy(agent));
}

/* The UCX log (UCX_LOG_FILE: stdout by default) and stderr, as written while an agent `name` is made, into `out`. */
static void make_agent_capturing_its_log(const char *name, char *out, size_t size) {
    int capture = memfd_create("ucx-log", MFD_CLOEXEC);
    CHECK(capture >= 0, "memfd_create: %s", strerror(errno));
    fflush(NULL);
    int saved_stdout = dup(STDOUT_FILENO), saved_stderr = dup(STDERR_FILENO);
    CHECK(saved_stdout >= 0 && saved_stderr >= 0 && dup2(capture, STDOUT_FILENO) >= 0 &&
              dup2(capture, STDERR_FILENO) >= 0,
          "redirect stdout and stderr: %s", strerror(errno));
    uint32_t agent = make_agent(name);
    fflush(NULL);
    dup2(saved_stdout, STDOUT_FILENO);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stdout);
    close(saved_stderr);
    ssize_t length = pread(capture, out, size - 1, 0);
    close(capture);
    CHECK(length >= 0, "read the captured log: %s", strerror(errno));
    out[length] = '\0';
    CHECK_OK(kvt_agent_destroy(agent));
}

/* UCX_TLS leaves sysv out and UCX drops posix itself (statvfs cannot ask UCX_POSIX_DIR): UCX opens no memory-mapping
 * transport, so the library sets none of their settings, and UCX warns of no MM_ERROR_HANDLING that nothing took. */
static void no_mm_settings_where_ucx_drops_every_memory_mapper(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "the loopback backend has no UCX settings");
    setenv("UCX_TLS", "^sysv", 1);
    setenv("UCX_POSIX_DIR", "/dev/shm/missing", 1);
    char log[16384];
    make_agent_capturing_its_log("no-memory-mapper", log, sizeof log);
    unsetenv("UCX_POSIX_DIR");
    unsetenv("UCX_TLS");
    CHECK(strstr(log, "could not stat shared memory device") != NULL, "UCX's log was captured: '%s'", log);
    CHECK(strstr(log, "MM_ERROR_HANDLING") == NULL, "UCX warned: '%s'", log);
}

/* Runs `child_case` where UCX allocates from SysV shared memory alone (UCX_TLS=^posix), with kernel.shmmax at
 * ROOMY_SYSV_LIMIT. */
static void run_with_sysv_alone(const char *child_case) {
    run_in_small_shm((small_shm){"/dev/shm", "UCX_TLS=^posix", false, ROOMY_SYSV_LIMIT, child_case, NULL});
}

/* SysV refuses what its limits have room for (every segment id taken) with UCX_TLS=^posix: the private-memory fallback
 * is refused, its detail naming what UCX had to choose from. */
static void private_fallback_names_what_ucx_had(void) { run_with_sysv_alone("private_fallback_when_sysv_refuses"); }

/* UCX_TLS=^posix, every SysV segment id taken and UCX allocating from SysV alone: ucp_mem_map fails, and the refusal
 * counts SysV shared memory alone, as the room check does. */
static void mem_map_failure_counts_what_ucx_tls_leaves_in(void) {
    run_with_sysv_alone("mem_map_failure_when_sysv_refuses");
}

/* UCX_TLS=^posix and prefaulting refused: the refusal counts SysV shared memory alone, as the room check does. */
static void prefault_failure_counts_what_ucx_tls_leaves_in(void) {
    run_with_sysv_alone("prefault_failure_in_sysv_alone");
}

/* Inside a child whose ucx.conf sets UCX_TLS (none in the environment): ucx_tls_read answers KVT_TEST_EXPECTED, or
 * every transport (NULL) where that is empty. */
static void ucx_conf_tls_as_read(void) {
    if (!in_small_shm()) return;
#ifdef KVT_HAVE_UCX
    const char *expected = getenv("KVT_TEST_EXPECTED");
    CHECK(expected != NULL, "run_in_small_shm names the value expected in KVT_TEST_EXPECTED");
    CHECK_OK(kvt_agent_destroy(make_agent("ucx-conf"))); /* loads UCX */
    ucp_config_t *config;
    CHECK(ucp_config_read(NULL, NULL, &config) == UCS_OK, "ucp_config_read");
    char out[256];
    const char *tls = NULL;
    bool read = ucx_tls_read(config, "", out, sizeof out, &tls);
    ucp_config_release(config);
    CHECK(read, "ucx_tls_read: %s", strerror(errno));
    CHECK(expected[0] ? tls != NULL && strcmp(tls, expected) == 0 : tls == NULL, "UCX_TLS read as '%s', not '%s'",
          tls ? tls : "(every transport)", expected[0] ? expected : "(every transport)");
#endif
}

/* A ucx.conf's UCX_TLS of 124 characters is read whole; one of 125, which ucp_config_print may have cut short, is
 * read as every transport rather than as a shorter list. */
static void ucx_conf_tls_is_read_whole_or_as_every_transport(void) {
    char whole[128] = "sysv,posix,tcp", cut[128] = "sysv,posix,self";
    for (int i = 0; i < 22; i++) {
        strcat(whole, ",self");
        strcat(cut, ",self");
    }
    CHECK(strlen(whole) == 124 && strlen(cut) == 125, "values of %zu and %zu characters", strlen(whole), strlen(cut));
    run_with_ucx_conf(whole, (small_shm){"/dev/shm", NULL, false, ROOMY_SYSV_LIMIT, "ucx_conf_tls_as_read", whole});
    run_with_ucx_conf(cut, (small_shm){"/dev/shm", NULL, false, ROOMY_SYSV_LIMIT, "ucx_conf_tls_as_read", ""});
}

/* UCX_TLS read as UCX 1.13 reads it: whole names, '^' negating the whole list, "all", the aliases (sm, shm and mm
 * cover posix and sysv), '\' taking a name as a transport's own, ":aux". */
static void ucx_tls_is_read_as_ucx_reads_it(void) {
#ifndef KVT_HAVE_UCX
    test_skip_reason = "the ucx backend is not built";
#else
    static const struct {
        const char *tls, *transport;
        bool uses;
    } cases[] = {
        {NULL, "sysv", true},
        {"all", "posix", true},
        {"^all", "posix", true},
        {"^sysv", "sysv", false},
        {"^sysv", "posix", true},
        {"posix,tcp,self", "posix", true},
        {"posix,tcp,self", "sysv", false},
        {"tcp,,posix", "posix", true},
        {"tcp", "sysv", false},
        {"tcp", "posix", false},
        {"sm,self", "sysv", true},
        {"shm", "posix", true},
        {"mm,tcp", "sysv", true},
        {"mm,tcp", "cma", false},
        {"^sm", "posix", false},
        {"^mm,tcp", "sysv", false},
        {"^mm,tcp", "cma", true},
        {"^mm,tcp", "tcp", false},
        {"sysvx,posixy,smx", "sysv", false},
        {"sysvx,posixy,smx", "posix", false},
        {"^sysvx", "sysv", true},
        {"\\posix", "posix", true},
        {"\\sm", "posix", false},
        {"^\\sm", "posix", true},
        {"sysv:aux", "sysv", true},
        {"rc", "rc_mlx5", true},
        {"rc", "ud_mlx5", true},
        {"^rc", "rc_mlx5", false},
        {"^rc", "ud_mlx5", true},
        {"ib,self", "tcp", false},
        {"", "posix", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(ucx_tls_uses(cases[i].tls, cases[i].transport) == cases[i].uses, "UCX_TLS=%s %s %s",
              cases[i].tls ? cases[i].tls : "(unset)", cases[i].uses ? "leaves in" : "leaves out", cases[i].transport);
#endif
}

TEST_MAIN("shared-memory", TEST(full_dev_shm_is_a_typed_refusal), TEST(full_posix_dir_is_a_typed_refusal),
          TEST(sysv_left_out_counts_the_posix_dir_alone), TEST(sysv_unlisted_counts_the_posix_dir_alone),
          TEST(sysv_left_out_by_ucx_conf_counts_the_posix_dir_alone), TEST(without_sysv_ipc_the_posix_dir_alone_counts),
          TEST(unaskable_sysv_limits_are_no_room), TEST(unaskable_posix_dir_is_no_room),
          TEST(unaskable_posix_dir_without_sysv_is_no_room), TEST(no_mm_settings_where_ucx_drops_every_memory_mapper),
          TEST(private_fallback_names_what_ucx_had), TEST(mem_map_failure_counts_what_ucx_tls_leaves_in),
          TEST(prefault_failure_counts_what_ucx_tls_leaves_in), TEST(ucx_conf_tls_is_read_whole_or_as_every_transport),
          TEST(ucx_conf_dir_is_removed_when_the_child_fails), TEST(ucx_tls_is_read_as_ucx_reads_it),
          TEST(allocation_in_a_small_shm), TEST(allocation_with_a_limit_unasked), TEST(allocation_in_posix_alone),
          TEST(private_fallback_when_sysv_refuses), TEST(mem_map_failure_when_sysv_refuses),
          TEST(prefault_failure_in_sysv_alone), TEST(ucx_conf_tls_as_read))
