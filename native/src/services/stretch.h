/* Stretches of work on the agent's thread (stretch.c): a thread that works for a long stretch gives its core
 * to a thread waiting for it every KVT_STRETCH_NS, instead of keeping it to the scheduler's next tick. */
#ifndef KVT_STRETCH_H
#define KVT_STRETCH_H

#include <stdbool.h>
#include <stdint.h>

/* A millisecond: on a kernel ticking at 250 Hz, a thread sharing the core of Node's thread otherwise keeps it
 * up to 4 ms at a time, and a native call Node's thread was preempted in lasts that long. */
#define KVT_STRETCH_NS 1000000u

/* The calling thread's stretch begins now: at its start and after each sleep or yield. */
void kvt_stretch_begin(void);
/* Yields the core now (sched_yield) and begins the next stretch. */
void kvt_stretch_yield(void);
/* Yields the core (sched_yield, at once back when no thread waits for it) when the calling thread's stretch
 * has lasted KVT_STRETCH_NS, and begins the next one; true when it did. Nothing on a thread that never
 * began a stretch. */
bool kvt_stretch_check(void);

#endif
