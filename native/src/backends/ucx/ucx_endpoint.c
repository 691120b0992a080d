/* The UCX backend's endpoints: how they fail, close (gracefully or by force) and are freed once nothing of
 * UCX refers to them. Progress thread only. */
#include "backends/ucx/ucx_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* UCX reported the endpoint failed (inside progress): mark it, and force-close it once progress returns. */
void ucx_on_endpoint_error(void *arg, ucp_ep_h ep, ucs_status_t status) {
    (void)ep;
    (void)status;
    ucx_endpoint *endpoint = arg;
    if (!endpoint->ep) return; /* closed already */
    if (endpoint->conn) atomic_store(&endpoint->conn->failed, true);
    if (endpoint->listed) return;
    endpoint->listed = true;
    endpoint->next_failed = endpoint->state->failed;
    endpoint->state->failed = endpoint;
}

static void unlist_failed(ucx_state *state, ucx_endpoint *endpoint) {
    if (!endpoint->listed) return;
    for (ucx_endpoint **link = &state->failed; *link; link = &(*link)->next_failed) {
        if (*link == endpoint) {
            *link = endpoint->next_failed;
            break;
        }
    }
    endpoint->listed = false;
}

static void unlist_detached(ucx_state *state, ucx_endpoint *endpoint) {
    for (ucx_endpoint **link = &state->detached; *link; link = &(*link)->next_detached) {
        if (*link == endpoint) {
            *link = endpoint->next_detached;
            return;
        }
    }
}

void ucx_unlist_warming(ucx_state *state, ucx_endpoint *endpoint) {
    if (!endpoint->warming) return;
    ucx_endpoint **link = &state->warming;
    while (*link != endpoint) link = &(*link)->next_warming;
    *link = endpoint->next_warming;
    endpoint->warming = false;
}

/* Frees a detached endpoint once nothing of UCX refers to it any more. */
void ucx_free_if_finished(ucx_endpoint *endpoint) {
    if (endpoint->conn || endpoint->ep || endpoint->mapping_ep || endpoint->closing || endpoint->flush ||
        endpoint->state->stopping)
        return;
    unlist_detached(endpoint->state, endpoint);
    free(endpoint);
}

static void on_close_done(void *request, ucs_status_t status, void *user_data) {
    (void)status;
    ucx_endpoint *endpoint = user_data;
    endpoint->state->closing--;
    endpoint->closing--;
    ucp_request_free(request);
    ucx_free_if_finished(endpoint);
}

/* Force-closes *ep, one of the endpoint's, and clears it: the close finishes in later progress. */
static void force_close(ucx_state *state, ucx_endpoint *endpoint, ucp_ep_h *ep) {
    ucp_request_param_t param = {.op_attr_mask =
                                     UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                                 .flags = UCP_EP_CLOSE_FLAG_FORCE,
                                 .cb = {.send = on_close_done},
                                 .user_data = endpoint};
    void *request = ucp_ep_close_nbx(*ep, &param);
    *ep = NULL;
    if (request != NULL && !UCS_PTR_IS_ERR(request)) {
        endpoint->closing++;
        state->closing++;
    }
}

void ucx_close_mapping_endpoint(ucx_state *state, ucx_endpoint *endpoint) {
    if (endpoint->mapping_ep) force_close(state, endpoint, &endpoint->mapping_ep);
}

/* Force-closes the endpoint (which ends its outstanding requests) without waiting: the close finishes in
 * later progress. */
void ucx_close_endpoint(ucx_state *state, ucx_endpoint *endpoint) {
    unlist_failed(state, endpoint);
    ucx_close_mapping_endpoint(state, endpoint);
    if (endpoint->ep) force_close(state, endpoint, &endpoint->ep);
}

/*
 * Marks the connection failed and force-closes its endpoint, which ends its outstanding requests
 * (UCS_ERR_CANCELED: the operations end KVT_ERR_REMOTE_DISCONNECT, unless they stopped for another
 * reason first). Does not wait. Posts are refused until the peer is loaded again, which connects a new
 * endpoint.
 */
void ucx_force_close(ucx_state *state, kvt_conn *conn) {
    atomic_store(&conn->failed, true);
    ucx_endpoint *endpoint = conn->backend;
    if (endpoint) ucx_close_endpoint(state, endpoint);
}

/* A detached endpoint whose force-close UCX finished inline has no callback left to free it: freed here. */
static void close_and_free(ucx_state *state, ucx_endpoint *endpoint) {
    ucx_close_endpoint(state, endpoint);
    ucx_free_if_finished(endpoint);
}

void ucx_close_failed_endpoints(ucx_state *state) {
    while (state->failed) close_and_free(state, state->failed);
}

/* The graceful close's flush ended: force-close the endpoint after progress (not inside UCX's callback).
 * A flush ended by the force-close itself (the deadline passed) has nothing left to do. */
void ucx_on_flush_done(void *request, ucs_status_t status, void *user_data) {
    (void)status;
    ucx_endpoint *endpoint = user_data;
    endpoint->flush = NULL;
    ucp_request_free(request);
    if (endpoint->ep && !endpoint->listed) {
        endpoint->listed = true;
        endpoint->next_failed = endpoint->state->failed;
        endpoint->state->failed = endpoint;
    }
    ucx_free_if_finished(endpoint);
}

/* Force-closes every detached endpoint whose flush is still outstanding at `now_ns` past its deadline
 * (all of them with UINT64_MAX); appends their peers' names to `forced` when it is not NULL. Returns how
 * many it force-closed. */
uint32_t ucx_close_overdue_endpoints(ucx_state *state, uint64_t now_ns, char *forced, size_t forced_size) {
    uint32_t count = 0;
    for (ucx_endpoint *endpoint = state->detached, *next; endpoint; endpoint = next) {
        next = endpoint->next_detached;
        if (!endpoint->ep || !endpoint->flush || now_ns < endpoint->flush_deadline_ns) continue;
        if (forced) {
            size_t used = strlen(forced);
            snprintf(forced + used, forced_size - used, "%s'%s'", count ? ", " : "", endpoint->peer);
        }
        count++;
        close_and_free(state, endpoint);
    }
    return count;
}
