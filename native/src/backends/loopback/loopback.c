/* The loopback backend: agents in one process; bytes move with memmove on the initiator's progress
 * thread, in bounded chunks, while the target agent's region table is read-locked — so a region the
 * target deregistered is never touched. */
#include "agent.h"

#include "backend.h"
#include "file_regions.h"
#include "heartbeat.h"
#include "services/copy.h"
#include "services/status.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LOOPBACK_CHUNK_BYTES (8u << 20)

static kvt_status loopback_start(kvt_agent *agent, char *detail, size_t detail_size) {
    (void)agent;
    (void)detail;
    (void)detail_size;
    return KVT_OK;
}

static void loopback_stop(kvt_agent *agent) { (void)agent; }

static kvt_status loopback_alloc(kvt_agent *agent, kvt_allocation *allocation, char *detail, size_t detail_size) {
    (void)agent;
    void *memory = mmap(NULL, allocation->length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
        snprintf(detail, detail_size, "kvt_mem_alloc: mmap of %llu bytes failed: %s",
                 (unsigned long long)allocation->length, strerror(errno));
        return errno == ENOMEM ? KVT_ERR_NO_MEMORY : KVT_ERR_BACKEND;
    }
    allocation->address = (uint64_t)(uintptr_t)memory;
    return KVT_OK;
}

static void loopback_free(kvt_agent *agent, kvt_allocation *allocation) {
    (void)agent;
    munmap((void *)(uintptr_t)allocation->address, allocation->length);
}

static kvt_status loopback_map(kvt_agent *agent, kvt_region *region, const kvt_allocation *exact, char *detail,
                               size_t detail_size) {
    (void)agent;
    (void)region;
    (void)exact;
    (void)detail;
    (void)detail_size;
    return KVT_OK;
}

static void loopback_unmap(kvt_agent *agent, kvt_region *region) {
    (void)agent;
    (void)region;
}

/* Loopback agents are found by name and incarnation; the process identity says which process. */
static const uint8_t *loopback_address(kvt_agent *agent, bool network_only, uint32_t *length) {
    (void)agent;
    (void)network_only;
    *length = 0;
    return NULL;
}

static kvt_status loopback_connect(kvt_agent *agent, kvt_conn *conn, char *detail, size_t detail_size) {
    uint64_t pid = conn->meta.process.pid;
    if (pid != agent->process.pid) {
        snprintf(detail, detail_size,
                 "kvt_peer_load: loopback peer '%s' lives in process %llu, not this one (%llu); use the ucx backend "
                 "across processes",
                 conn->meta.name, (unsigned long long)pid, (unsigned long long)agent->process.pid);
        return KVT_ERR_NOT_SUPPORTED;
    }
    kvt_agent *target = kvt_agent_find_live(conn->meta.name, conn->meta.incarnation);
    if (!target) {
        snprintf(detail, detail_size, "kvt_peer_load: loopback peer '%s' (incarnation %llu) is not alive",
                 conn->meta.name, (unsigned long long)conn->meta.incarnation);
        return KVT_ERR_REMOTE_DISCONNECT;
    }
    kvt_agent_release(target);
    return KVT_OK;
}

static void loopback_disconnect(kvt_agent *agent, kvt_conn *conn) {
    (void)agent;
    (void)conn;
}

/* The target's live region holding [address, +length), with target->region_lock read-held. */
static const kvt_region *find_target_region(const kvt_agent *target, uint32_t id, uint64_t address, uint64_t length) {
    for (uint32_t i = 0; i < target->region_count; i++) {
        const kvt_region *region = target->regions[i];
        if (region->id == id && address >= region->address && length <= region->length &&
            address - region->address <= region->length - length)
            return region;
    }
    return NULL;
}

/* Agents of one process may register the same memory: overlapping pieces need memmove. */
static void copy_piece(kvt_copier *copier, uint8_t *destination, const uint8_t *source, uint64_t length) {
    uintptr_t d = (uintptr_t)destination, s = (uintptr_t)source;
    if (d < s + length && s < d + length) {
        kvt_copier_flush(copier);
        memmove(destination, source, length);
    } else {
        kvt_copier_add(copier, destination, source, length);
    }
}

static void loopback_advance(kvt_agent *agent, kvt_op *op) {
    (void)agent;
    if (op->error == KVT_OK && atomic_load(&op->cancel_requested)) op->error = KVT_ERR_CANCELED;
    if (op->error == KVT_OK && kvt_op_more(op)) {
        kvt_agent *target = kvt_agent_find_live(op->conn->meta.name, op->conn->meta.incarnation);
        if (!target) {
            atomic_store(&op->conn->failed, true);
            op->error = KVT_ERR_REMOTE_DISCONNECT;
        } else {
            pthread_rwlock_rdlock(&target->region_lock);
            uint64_t budget = LOOPBACK_CHUNK_BYTES;
            uint64_t moved = 0;
            kvt_copier copier = {.streaming = op->streaming};
            while (budget > 0 && kvt_op_more(op)) {
                const kvt_desc *d = &op->descs[op->next];
                uint64_t n = d->length - op->next_offset;
                if (n > budget) n = budget;
                uint64_t remote = d->remote_address + op->next_offset;
                const kvt_remote_region *advertised = &op->conn->meta.regions[d->remote_slot];
                if (!find_target_region(target, advertised->id, remote, n)) {
                    op->error = KVT_ERR_REMOTE_DISCONNECT; /* the target withdrew the region */
                    break;
                }
                uint8_t *local = (uint8_t *)(uintptr_t)(d->local_address + op->next_offset);
                uint8_t *far = (uint8_t *)(uintptr_t)remote;
                if (op->direction == KVT_XFER_READ)
                    copy_piece(&copier, local, far, n);
                else
                    copy_piece(&copier, far, local, n);
                moved += n;
                budget -= n;
                op->next_offset += n;
                if (op->next_offset == d->length) {
                    op->next++;
                    op->next_offset = 0;
                }
            }
            kvt_copier_flush(&copier); /* while the target's regions are still held */
            kvt_copy_fence();
            pthread_rwlock_unlock(&target->region_lock);
            kvt_agent_release(target);
            kvt_op_add_bytes_done(op, moved);
        }
    }
    if (op->error != KVT_OK || !kvt_op_more(op)) op->phase = KVT_PHASE_MOVED;
}

static kvt_status loopback_notify(kvt_agent *agent, kvt_conn *conn, kvt_op *op, const uint8_t *data, uint32_t length) {
    (void)op;
    kvt_agent *target = kvt_agent_find_live(conn->meta.name, conn->meta.incarnation);
    if (!target) {
        atomic_store(&conn->failed, true);
        return KVT_ERR_REMOTE_DISCONNECT;
    }
    kvt_deliver_notification(&target->delivery, agent->name, data, length);
    kvt_agent_release(target);
    return KVT_OK;
}

/* A heartbeat probe travels as a command to the target agent's progress thread, which answers with a
 * command to the prober's: answered only while both threads run, as over UCX. */
typedef struct {
    char prober[KVT_MAX_NAME + 1];
    uint64_t prober_incarnation;
    uint32_t peer_id; /* the prober's id of the target */
} loopback_probe_message;

static kvt_status take_answer(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    (void)detail;
    (void)detail_size;
    kvt_heartbeat_answered(agent, ((const loopback_probe_message *)arg)->peer_id);
    return KVT_OK;
}

static kvt_status answer_probe(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    (void)detail;
    (void)detail_size;
    const loopback_probe_message *probe = arg;
    kvt_counter_add(&agent->counters, KVT_COUNTER_HEARTBEATS_ANSWERED, 1);
    kvt_agent *prober = kvt_agent_find_live(probe->prober, probe->prober_incarnation);
    if (!prober) return KVT_OK;
    kvt_command_try_call_async(&prober->commands, take_answer, probe, sizeof *probe);
    kvt_agent_release(prober);
    return KVT_OK;
}

static void loopback_probe(kvt_agent *agent, kvt_conn *conn, uint32_t peer_id) {
    kvt_agent *target = kvt_agent_find_live(conn->meta.name, conn->meta.incarnation);
    if (!target) {
        /* The target is gone, as a dead process is over UCX: the heartbeat reports the peer at its next round. */
        atomic_store(&conn->failed, true);
        return;
    }
    loopback_probe_message probe = {.prober_incarnation = agent->entry.incarnation, .peer_id = peer_id};
    strcpy(probe.prober, agent->name);
    kvt_command_try_call_async(&target->commands, answer_probe, &probe, sizeof probe);
    kvt_agent_release(target);
}

static void loopback_describe(kvt_agent *agent, kvt_conn *conn, FILE *out) {
    fprintf(out, "loopback: memmove inside process %llu, from agent '%s' to agent '%s'\n",
            (unsigned long long)agent->process.pid, conn->meta.name, agent->name);
}

static bool loopback_progress(kvt_agent *agent) {
    (void)agent;
    return false;
}

static void loopback_sleep(kvt_agent *agent, int timeout_ms) {
    struct pollfd fd = {.fd = agent->commands.fd, .events = POLLIN};
    poll(&fd, 1, timeout_ms);
}

const kvt_backend kvt_loopback_backend = {
    .start = loopback_start,
    .stop = loopback_stop,
    .alloc = loopback_alloc,
    .free_allocation = loopback_free,
    .map = loopback_map,
    .unmap = loopback_unmap,
    .address = loopback_address,
    .connect = loopback_connect,
    .disconnect = loopback_disconnect,
    .advance = loopback_advance,
    .notify = loopback_notify,
    .probe = loopback_probe,
    .describe = loopback_describe,
    .allocation_on_any_thread = true,
    .registration_on_any_thread = true,
    .notify_on_any_thread = true,
    .progress = loopback_progress,
    .sleep = loopback_sleep,
};
