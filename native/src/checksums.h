/* kvt_mem_checksums (checksums.c): the agent's resources for sums on a GPU. */
#ifndef KVT_CHECKSUMS_H
#define KVT_CHECKSUMS_H

typedef struct kvt_agent kvt_agent;

/* Frees what the agent's vram checksums kept (agent_free: no call is in flight). */
void kvt_checksums_agent_free(kvt_agent *agent);

#endif
