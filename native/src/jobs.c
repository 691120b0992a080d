/* Agent jobs: work a *_begin call hands to the progress thread, answered once by a status call. */
#include "jobs.h"

#include "agent.h"
#include "services/status.h"

#include <stdio.h>
#include <stdlib.h>

kvt_status kvt_job_new(const char *call, kvt_mem_job **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return kvt_fail(KVT_ERR_NO_MEMORY, "%s: out of memory", call);
    return KVT_OK;
}

/* On the progress thread: runs the job and records its outcome; the batch of commands it ran in wakes the
 * consumer once it ended. */
static kvt_status run_job(kvt_agent *agent, void *arg, char *detail, size_t detail_size) {
    (void)detail;
    (void)detail_size;
    kvt_mem_job *job = *(kvt_mem_job **)arg;
    char failure[sizeof job->detail] = "";
    kvt_status status = job->work(agent, job, failure, sizeof failure);
    pthread_mutex_lock(&agent->lock);
    job->status = status;
    snprintf(job->detail, sizeof job->detail, "%s", failure);
    job->done = true;
    pthread_mutex_unlock(&agent->lock);
    agent->jobs_ended = true; /* the batch's byte (run_commands) */
    return KVT_OK;
}

uint64_t kvt_job_start(kvt_agent *agent, kvt_mem_job *job,
                       kvt_status (*work)(kvt_agent *, kvt_mem_job *, char *, size_t)) {
    job->work = work;
    job->status = KVT_IN_PROGRESS;
    pthread_mutex_lock(&agent->lock);
    job->id = agent->next_mem_job_id++;
    kvt_mem_job **tail = &agent->mem_jobs;
    while (*tail) tail = &(*tail)->next;
    *tail = job;
    uint64_t id = job->id;
    pthread_mutex_unlock(&agent->lock);
    kvt_command_call_async(&agent->commands, run_job, &job, sizeof job);
    return id;
}

/* Answers job `job_id` once (writing what a peer load loaded, when asked), for `call`. */
static kvt_status answer(uint32_t agent_id, uint64_t job_id, const char *call, uint32_t *out_peer,
                         uint64_t *out_generation) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, call, &agent);
    if (status != KVT_OK) return status;
    pthread_mutex_lock(&agent->lock);
    kvt_mem_job **link = &agent->mem_jobs;
    while (*link && (*link)->id != job_id) link = &(*link)->next;
    kvt_mem_job *job = *link;
    if (!job) {
        pthread_mutex_unlock(&agent->lock);
        return kvt_agent_finish(agent,
                                kvt_fail(KVT_ERR_NOT_FOUND, "%s: agent '%s' has no job %llu begun and not yet answered",
                                         call, agent->name, (unsigned long long)job_id));
    }
    if (job->done) {
        *link = job->next;
        status = job->status == KVT_OK ? KVT_OK : kvt_fail(job->status, "%s", job->detail);
        if (status == KVT_OK && out_peer) *out_peer = job->peer;
        if (status == KVT_OK && out_generation) *out_generation = job->generation;
        free(job);
    } else {
        status = KVT_IN_PROGRESS;
    }
    pthread_mutex_unlock(&agent->lock);
    kvt_agent_release(agent); /* the outcome is an answer, not a failing call: not counted */
    return status;
}

kvt_status kvt_mem_job_status(uint32_t agent_id, uint64_t job_id) {
    return answer(agent_id, job_id, "kvt_mem_job_status", NULL, NULL);
}

kvt_status kvt_peer_load_status(uint32_t agent_id, uint64_t job_id, uint32_t *out_peer, uint64_t *out_generation) {
    return answer(agent_id, job_id, "kvt_peer_load_status", out_peer, out_generation);
}

void kvt_mem_jobs_free(kvt_agent *agent) {
    while (agent->mem_jobs) {
        kvt_mem_job *job = agent->mem_jobs;
        agent->mem_jobs = job->next;
        free(job);
    }
}
