/* Agent jobs: work a *_begin call hands to the progress thread, answered once by a status call (jobs.c). */
#ifndef KVT_JOBS_H
#define KVT_JOBS_H

#include "kvreuse_transport.h"

#include "memory.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvt_conn;

typedef struct kvt_mem_job kvt_mem_job;

struct kvt_mem_job {
    kvt_mem_job *next;
    uint64_t id;
    /* On the progress thread: does the job's work; a failure's detail goes into `detail`. */
    kvt_status (*work)(kvt_agent *agent, kvt_mem_job *job, char *detail, size_t detail_size);
    union {
        struct {
            uint64_t address;
            uint32_t flags;
        } populate;                /* kvt_mem_alloc_begin */
        kvt_allocation allocation; /* kvt_mem_free_begin: no longer in the agent's table */
        struct {
            kvt_region *region; /* no longer in the agent's table */
            bool fence;
            uint64_t fences_before; /* agent->fences when it was withdrawn */
        } withdrawal;               /* kvt_mem_deregister_begin */
        struct kvt_conn *conn;      /* kvt_peer_load_begin: connected, then installed, on the progress thread */
    } subject;
    /* kvt_peer_load_begin: the peer loaded and its generation, written by the job. */
    uint32_t peer;
    uint64_t generation;
    /* Under agent->lock: */
    bool done;
    kvt_status status;
    char detail[512];
};

/* A job for `call`, not yet started: allocated before the call changes anything, so that running out of
 * memory refuses the call with nothing done. */
kvt_status kvt_job_new(const char *call, kvt_mem_job **out);

/* Queues the job on the progress thread, which runs commands in order: a shutdown accepted after this
 * runs after the job. Returns its id for kvt_mem_job_status (kvt_peer_load_status for a peer load). */
uint64_t kvt_job_start(kvt_agent *agent, kvt_mem_job *job,
                       kvt_status (*work)(kvt_agent *, kvt_mem_job *, char *, size_t));

/* Frees the jobs whose outcome nobody asked for (destroy, after the progress thread ended). */
void kvt_mem_jobs_free(kvt_agent *agent);

#endif
