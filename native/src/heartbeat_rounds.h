/* Heartbeat rounds on demand, for tests: kvt_fault_heartbeat_rounds (heartbeat_rounds.c). */
#ifndef KVT_HEARTBEAT_ROUNDS_H
#define KVT_HEARTBEAT_ROUNDS_H

#include <stdbool.h>

typedef struct kvt_agent kvt_agent;

/* (P) Whether the heartbeat runs only the rounds asked for: it is held, or asked rounds are still to run. */
bool kvt_heartbeat_rounds_on_demand(kvt_agent *agent);
/* (P) Whether an asked round is still to run. */
bool kvt_heartbeat_round_asked(kvt_agent *agent);
/* (P) An asked round ran: its caller may return once all of them did. */
void kvt_heartbeat_round_ran(kvt_agent *agent);

#endif
