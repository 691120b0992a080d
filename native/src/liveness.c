/* Peer liveness from the process identity in a peer's metadata: pid, pid namespace, kernel boot id and
 * start time. A pid means something only inside one pid namespace on one host, so a peer is judged by
 * its pid only when it shares both with this process; for every other peer (another container, another
 * host) liveness comes from the transport (UCX endpoint errors). */
#include "agent.h"

#include "liveness.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LIVENESS_PERIOD_NS 100000000ull /* how often peers with operations in flight are checked */

static bool read_boot_id(uint8_t out[16]) {
    FILE *file = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!file) return false;
    char text[64] = {0};
    bool ok = fgets(text, sizeof text, file) != NULL;
    fclose(file);
    unsigned n = 0;
    for (const char *c = text; ok && *c && n < 32; c++) {
        int digit = (*c >= '0' && *c <= '9') ? *c - '0' : (*c >= 'a' && *c <= 'f') ? *c - 'a' + 10 : -1;
        if (digit < 0) continue;
        out[n / 2] = (uint8_t)(n % 2 ? (out[n / 2] | digit) : digit << 4);
        n++;
    }
    return ok && n == 32;
}

/* The inode of this process's pid namespace (what `readlink /proc/self/ns/pid` shows), 0 if unknown. */
static uint64_t read_pid_namespace(void) {
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) != 0) return 0;
    return (uint64_t)st.st_ino;
}

/* The decimal number at text, as /proc writes it. Not strtoull: under _GNU_SOURCE, glibc 2.38 and later bind
 * it to __isoc23_strtoull@GLIBC_2.38, above the glibc the prebuilt library promises to load on (2.34). */
static unsigned long long parse_decimal(const char *text) {
    unsigned long long value = 0;
    for (; *text >= '0' && *text <= '9'; text++) value = value * 10 + (unsigned long long)(*text - '0');
    return value;
}

/* Start time (clock ticks since boot) and state of a process from /proc/<pid>/stat. */
static bool read_process_stat(uint64_t pid, uint64_t *start_time, char *state) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%llu/stat", (unsigned long long)pid);
    FILE *file = fopen(path, "r");
    if (!file) return false;
    char line[1024];
    bool ok = fgets(line, sizeof line, file) != NULL;
    fclose(file);
    const char *after_name = ok ? strrchr(line, ')') : NULL;
    if (!after_name) return false;
    /* Fields after the name: 3 state, 4..21, 22 starttime. */
    unsigned long long value = 0;
    char s = '?';
    int field = 2;
    for (const char *c = after_name + 1; *c && field < 22; c++) {
        if (*c != ' ') continue;
        field++;
        if (field == 3) s = c[1];
        if (field == 22) value = parse_decimal(c + 1);
    }
    if (field != 22) return false;
    *start_time = value;
    *state = s;
    return true;
}

void kvt_process_identity_self(kvt_process_identity *out) {
    *out = (kvt_process_identity){.pid = (uint64_t)getpid(), .pid_namespace = read_pid_namespace()};
    char state;
    if (!read_boot_id(out->boot_id) || !read_process_stat(out->pid, &out->start_time, &state))
        memset(out->boot_id, 0, sizeof out->boot_id); /* unknown: never judged by pid */
}

static kvt_process_identity own;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;

static void read_own_identity(void) { kvt_process_identity_self(&own); }

/* Whether the process is on this host (its boot id known and this one's) with its pid namespace known. */
static bool on_this_host(const kvt_process_identity *identity) {
    static const uint8_t unknown[16];
    pthread_once(&own_once, read_own_identity);
    return memcmp(identity->boot_id, unknown, sizeof unknown) != 0 &&
           memcmp(own.boot_id, identity->boot_id, sizeof own.boot_id) == 0 && identity->pid_namespace != 0;
}

bool kvt_process_checkable(const kvt_process_identity *identity) {
    return on_this_host(identity) && identity->pid_namespace == own.pid_namespace;
}

bool kvt_process_in_another_pid_namespace(const kvt_process_identity *identity) {
    return on_this_host(identity) && own.pid_namespace != 0 && identity->pid_namespace != own.pid_namespace;
}

static bool process_stat_gone(const kvt_process_identity *identity) {
    uint64_t start_time;
    char state;
    if (!read_process_stat(identity->pid, &start_time, &state)) return true;
    return start_time != identity->start_time || state == 'Z' || state == 'X';
}

/* Whether the process behind a pidfd has exited (zombies included): one poll. */
static bool pidfd_exited(int fd) {
    struct pollfd exited = {.fd = fd, .events = POLLIN};
    return poll(&exited, 1, 0) > 0; /* an interrupted poll (-1) says nothing */
}

/*
 * Operations are checked as they finish moving (once per progress round for all of them: kvt_ops_run), so
 * the check must be cheap: reading /proc/<pid>/stat took 16-30 us here, a fifth of a 128 KiB read's round
 * trip. The first check opens a pidfd and then reads the stat once: a start time that still matches means
 * the pidfd is that process (a reused pid has another start time), and from then on one poll of it answers.
 */
bool kvt_conn_process_gone(kvt_conn *conn) {
    const kvt_process_identity *identity = &conn->meta.process;
    if (!kvt_process_checkable(identity)) return false;
    if (conn->process_fd >= 0) return pidfd_exited(conn->process_fd);
    bool first = !conn->process_fd_tried;
    conn->process_fd_tried = true;
    int fd = first ? (int)syscall(SYS_pidfd_open, (pid_t)identity->pid, 0) : -1;
    if (process_stat_gone(identity)) {
        if (fd >= 0) close(fd);
        return true;
    }
    conn->process_fd = fd; /* -1 (no pidfds here, or none left): the stat is read at every check */
    return false;
}

void kvt_conn_forget_process(kvt_conn *conn) {
    if (conn->process_fd >= 0) close(conn->process_fd);
    conn->process_fd = -1;
}

void kvt_liveness_check(kvt_agent *agent, uint64_t *next_check_ns, void (*on_gone)(kvt_agent *, kvt_conn *)) {
    uint64_t now = kvt_now_ns();
    if (now < *next_check_ns) return;
    *next_check_ns = now + LIVENESS_PERIOD_NS;
    for (kvt_op *op = agent->active; op; op = op->next_active)
        if (!atomic_load(&op->conn->failed) && kvt_conn_process_gone(op->conn)) on_gone(agent, op->conn);
}
