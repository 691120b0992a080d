/* Whether a peer's process is still alive (liveness.c). */
#ifndef KVT_LIVENESS_H
#define KVT_LIVENESS_H

#include "kvreuse_transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;
struct kvt_conn;

/* Identifies a process: pid, pid namespace (inode of /proc/<pid>/ns/pid; 0 unknown), kernel boot id
 * (all zero: unknown) and start time (so a reused pid is not it). */
typedef struct {
    uint64_t pid;
    uint64_t pid_namespace;
    uint8_t boot_id[16];
    uint64_t start_time;
} kvt_process_identity;
void kvt_process_identity_self(kvt_process_identity *out);
/* Whether a process can be judged by its pid from here: same host (boot id) and same pid namespace. */
bool kvt_process_checkable(const kvt_process_identity *identity);
/* Whether a process is on this host (boot id) in another pid namespace: a container beside this one. */
bool kvt_process_in_another_pid_namespace(const kvt_process_identity *identity);

/* True only when the peer's process shares this process's host (boot id) and pid namespace and no
 * process with that pid and start time is alive (a zombie counts as gone). Peers elsewhere are never
 * judged gone here: the transport reports them. Progress thread only. */
bool kvt_conn_process_gone(struct kvt_conn *conn);
/* Closes what kvt_conn_process_gone opened for `conn`. */
void kvt_conn_forget_process(struct kvt_conn *conn);

/* (P, liveness.c) At most every 100 ms: calls `on_gone` for each not yet failed connection of an active operation
 * whose process is gone (kvt_conn_process_gone). */
void kvt_liveness_check(kvt_agent *agent, uint64_t *next_check_ns, void (*on_gone)(kvt_agent *, struct kvt_conn *));

#endif
