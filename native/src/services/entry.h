/* Entry and exit of API calls: the process-wide table of agents (entry.c). */
#ifndef KVT_ENTRY_H
#define KVT_ENTRY_H

#include "kvreuse_transport.h"
#include "services/commands.h"
#include "services/counters.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct kvt_agent kvt_agent;
struct kvt_delivery;
struct kvt_faults;

/*
 * An agent's entry in the table, and the directory through which the services below the agent reach its
 * parts: the agent begins with it (agent.h), so kvt_enter hands out the agent it stands for. The agent
 * fills in everything above `api_refs` before kvt_entry_add; the fields from `api_refs` on are the
 * table's, under its lock.
 */
typedef struct kvt_registration {
    const char *name; /* the agent's name, which outlives the entry */
    uint64_t incarnation;
    pthread_mutex_t *lock; /* the agent's lock */
    kvt_counter_set *counters;
    kvt_command_queue *commands;
    struct kvt_delivery *delivery;
    struct kvt_faults *faults;

    uint32_t id;
    uint32_t api_refs;
    bool ready;           /* started (and not shutting down): visible to every call and to loopback peers */
    _Atomic bool closing; /* a shutdown is deciding: new API calls wait for its outcome */
    bool shutting_down;   /* a shutdown was accepted: only its status and destroy find the agent */
    bool destroying;      /* a destroy owns the agent: nothing finds it */
    bool thread_started;  /* the progress thread exists (to join) */
    pthread_t thread;
    _Atomic bool abandoned; /* the library is being unloaded: the progress thread returns at once */
} kvt_registration;

/* Adds the entry under its agent's name, giving it an id: NOT_ALLOWED when the name is taken. */
kvt_status kvt_entry_add(kvt_registration *entry);
/* Takes the entry out of the table (never started, or its start failed). */
void kvt_entry_remove(kvt_registration *entry);
/* Records whether the agent's progress thread was started / whether the agent is ready. */
void kvt_entry_set_thread_started(kvt_registration *entry, bool started);
void kvt_entry_set_ready(kvt_registration *entry, bool ready);
bool kvt_entry_shutting_down(kvt_registration *entry);

/* Starts an API call on an agent: clears the thread's detail and acquires it (a failure is counted). */
kvt_status kvt_enter(uint32_t id, const char *call, kvt_agent **out);
/* kvt_enter for the calls that also find an agent still starting, whose start failed, or shutting down. */
kvt_status kvt_enter_any_state(uint32_t id, const char *call, kvt_agent **out);
/* As kvt_enter, for the services: the agent's entry. */
kvt_status kvt_enter_entry(uint32_t id, const char *call, kvt_registration **out);
/* A poll's arguments: INVALID_PARAM "<call>: <requirement>" (counted) unless `arguments_present`,
 * then kvt_enter. */
kvt_status kvt_poll_enter(uint32_t id, const char *call, bool arguments_present, const char *requirement,
                          kvt_agent **out);
/* Looks an agent up and pins it against destruction; NOT_FOUND (with detail naming `call`) if absent. */
kvt_status kvt_agent_acquire(uint32_t id, const char *call, kvt_agent **out);
void kvt_agent_release(kvt_agent *agent);
void kvt_entry_release(kvt_registration *entry);
/* Counts `status` if it is an error, releases the agent and returns `status`. */
kvt_status kvt_agent_finish(kvt_agent *agent, kvt_status status);
kvt_status kvt_entry_finish(kvt_registration *entry, kvt_status status);
/* Finds a live agent by name and incarnation and pins it (loopback peers). NULL when gone. */
kvt_agent *kvt_agent_find_live(const char *name, uint64_t incarnation);

/* The entry of an agent kvt_enter handed out. */
kvt_registration *kvt_entry_of(kvt_agent *agent);

/* A shutdown's decision: closes the door to new calls. KVT_IN_PROGRESS when a shutdown was accepted
 * before, NOT_ALLOWED (naming `call`) while another thread decides one, else KVT_OK: the caller waits for
 * running calls (kvt_entry_wait_alone), decides, then reports with kvt_entry_decide_shutdown. */
kvt_status kvt_entry_close_door(kvt_registration *entry, const char *call);
/* Waits until no other thread is inside an API call on the agent. */
void kvt_entry_wait_alone(kvt_registration *entry);
/* Opens the door again; when `accepted`, hides the agent from every call but its shutdown status and
 * destroy, and waits for calls (loopback copies) that found it just before. */
void kvt_entry_decide_shutdown(kvt_registration *entry, bool accepted);
/* A destroy takes the entry out of the table once no other call is inside; false when another destroy
 * already owns it. */
bool kvt_entry_begin_destroy(kvt_registration *entry);

#endif
