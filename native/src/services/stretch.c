/* Stretches of work on the agent's thread: a yield once a millisecond. */
#include "services/stretch.h"

#include "services/util.h"

#include <sched.h>

/* 0: this thread never began a stretch (not an agent's thread). */
static _Thread_local uint64_t stretch_since_ns;

void kvt_stretch_begin(void) { stretch_since_ns = kvt_now_ns(); }

void kvt_stretch_yield(void) {
    sched_yield();
    kvt_stretch_begin();
}

bool kvt_stretch_check(void) {
    if (stretch_since_ns == 0 || kvt_now_ns() - stretch_since_ns < KVT_STRETCH_NS) return false;
    kvt_stretch_yield();
    return true;
}
