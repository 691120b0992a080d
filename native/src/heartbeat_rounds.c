/* Heartbeat rounds on demand: kvt_fault_heartbeat_rounds takes an agent's heartbeat off its clock and has
 * its progress thread run the rounds a test asks for, one per turn, waiting until they ran. */
#include "agent.h"

#include "heartbeat_rounds.h"
#include "services/status.h"

#include <time.h>

bool kvt_heartbeat_rounds_on_demand(kvt_agent *agent) {
    return atomic_load(&agent->faults.heartbeat_held) || kvt_heartbeat_round_asked(agent);
}

bool kvt_heartbeat_round_asked(kvt_agent *agent) {
    return atomic_load(&agent->faults.heartbeat_rounds_run) < atomic_load(&agent->faults.heartbeat_rounds_asked);
}

void kvt_heartbeat_round_ran(kvt_agent *agent) { atomic_fetch_add(&agent->faults.heartbeat_rounds_run, 1); }

kvt_status kvt_fault_heartbeat_rounds(uint32_t agent_id, uint32_t rounds) {
    kvt_agent *agent;
    kvt_status status = kvt_enter(agent_id, "kvt_fault_heartbeat_rounds", &agent);
    if (status != KVT_OK) return status;
    if (atomic_load(&agent->faults.progress_stalled))
        return kvt_agent_finish(agent, kvt_fail(KVT_ERR_NOT_ALLOWED,
                                                "kvt_fault_heartbeat_rounds: the agent's progress thread is stalled "
                                                "(kvt_fault_stall_progress): no round would run"));
    atomic_store(&agent->faults.heartbeat_held, true);
    uint64_t target = atomic_fetch_add(&agent->faults.heartbeat_rounds_asked, rounds) + rounds;
    pthread_mutex_lock(&agent->lock);
    kvt_command_kick(&agent->commands);
    pthread_mutex_unlock(&agent->lock);
    while (atomic_load(&agent->faults.heartbeat_rounds_run) < target && !atomic_load(&agent->entry.closing))
        nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
    return kvt_agent_finish(agent, KVT_OK);
}
