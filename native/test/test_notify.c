/* Notifications: standalone sends, a transfer's completion notification, limits and refusals. */
#include "harness.h"

#include <poll.h>

typedef struct {
    uint32_t agent;
    char *sender;
    uint8_t *data;
    uint32_t length;
} receipt;

static bool notification_received(void *context) {
    receipt *r = context;
    uint32_t got = 0;
    CHECK_OK(kvt_notify_poll(r->agent, r->sender, KVT_MAX_NAME + 1, r->data, KVT_MAX_NOTIFICATION, &r->length, &got));
    return got == 1;
}

/* Waits until `agent` has a notification and returns it. */
static uint32_t receive(uint32_t agent, char *sender, uint8_t *data) {
    receipt r = {.agent = agent, .sender = sender, .data = data};
    wait_until(agent, notification_received, &r, "a notification", WAIT_DEADLINE_MS);
    return r.length;
}

static void send_and_poll(void) {
    uint32_t a = make_agent("notify-a"), b = make_agent("notify-b");
    uint64_t generation;
    uint32_t peer = load_peer(a, b, &generation);
    char sender[KVT_MAX_NAME + 1];
    static uint8_t data[KVT_MAX_NOTIFICATION];
    uint32_t length = 0, got = 9;
    CHECK_OK(kvt_notify_poll(b, sender, sizeof sender, data, sizeof data, &length, &got));
    CHECK(got == 0, "nothing queued yet");
    int32_t fd;
    CHECK_OK(kvt_agent_wake_fd(b, &fd));

    const char *messages[] = {"pin:block-17", "release:block-17", "x"};
    for (int i = 0; i < 3; i++)
        CHECK_OK(kvt_notify_send(a, peer, generation, (const uint8_t *)messages[i], (uint32_t)strlen(messages[i])));
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 60000) == 1, "the receiver's wake fd fires");
    for (int i = 0; i < 3; i++) {
        length = receive(b, sender, data);
        CHECK(strcmp(sender, "notify-a") == 0, "sender name '%s'", sender);
        CHECK(length == strlen(messages[i]) && memcmp(data, messages[i], length) == 0, "message %d in order", i);
    }
    CHECK(counter(a, KVT_COUNTER_NOTIFICATIONS_SENT) == 3, "sent counted");
    CHECK(counter(b, KVT_COUNTER_NOTIFICATIONS_RECEIVED) == 3, "received counted");
    CHECK(counter(b, KVT_COUNTER_PENDING_NOTIFICATIONS) == 0, "nothing pending");

    /* The largest allowed message, then too large and empty ones. */
    for (uint32_t i = 0; i < KVT_MAX_NOTIFICATION; i++) data[i] = (uint8_t)(i * 31);
    CHECK_OK(kvt_notify_send(a, peer, generation, data, KVT_MAX_NOTIFICATION));
    static uint8_t received[KVT_MAX_NOTIFICATION];
    /* A too-small buffer is refused and keeps the message queued. */
    wait_counter_at_least(b, KVT_COUNTER_PENDING_NOTIFICATIONS, 1);
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_notify_poll(b, sender, sizeof sender, received, 100, &length, &got));
    CHECK_DETAIL("stays queued");
    length = receive(b, sender, received);
    CHECK(length == KVT_MAX_NOTIFICATION && memcmp(received, data, length) == 0, "max-size message intact");
    static uint8_t too_big[KVT_MAX_NOTIFICATION + 1];
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_notify_send(a, peer, generation, too_big, sizeof too_big));
    CHECK_DETAIL("1..4096 bytes");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_notify_send(a, peer, generation, data, 0));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_notify_send(a, peer, generation, NULL, 5));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_notify_send(a, peer, generation + 1, data, 5));
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_notify_send(a, peer + 1, generation, data, 5));
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_notify_poll(b, NULL, 0, data, sizeof data, &length, &got));
    CHECK_OK(kvt_agent_destroy(a));
    CHECK_OK(kvt_agent_destroy(b));
}

static void transfer_completion_notification(void) {
    uint32_t source = make_agent("note-source"), reader = make_agent("note-reader");
    uint8_t *sm, *rm;
    uint32_t sr = alloc_region(source, 1u << 20, &sm), rr = alloc_region(reader, 1u << 20, &rm);
    fill_pattern(sm, 1u << 20, 5);
    uint64_t generation;
    uint32_t peer = load_peer(reader, source, &generation);
    const uint32_t zero = 0;
    const uint64_t offset = 0, length = 1u << 20;
    const char note[] = "read-done:request-42";
    uint64_t op;
    CHECK_OK(kvt_xfer_post(reader, KVT_XFER_READ, peer, generation, 1, &zero, &offset, &zero, &offset, &length, 1, &rr,
                           1, &sr, (const uint8_t *)note, (uint32_t)strlen(note), &op));
    CHECK(wait_op(reader, op, NULL) == KVT_OK, "read with notification");
    CHECK(memcmp(rm, sm, 1u << 20) == 0, "bytes");
    char sender[KVT_MAX_NAME + 1];
    static uint8_t data[KVT_MAX_NOTIFICATION];
    uint32_t got_length = receive(source, sender, data);
    CHECK(strcmp(sender, "note-reader") == 0 && got_length == strlen(note) && memcmp(data, note, got_length) == 0,
          "the source got the completion notification");
    CHECK_OK(kvt_xfer_release(reader, op));
    /* A failed transfer sends no notification. */
    CHECK_OK(kvt_fault_fail(reader, KVT_FAULT_COMPLETION, 1, KVT_ERR_BACKEND));
    CHECK_OK(kvt_xfer_post(reader, KVT_XFER_READ, peer, generation, 1, &zero, &offset, &zero, &offset, &length, 1, &rr,
                           1, &sr, (const uint8_t *)note, (uint32_t)strlen(note), &op));
    CHECK(wait_op(reader, op, NULL) == KVT_ERR_BACKEND, "injected completion failure");
    CHECK_OK(kvt_xfer_release(reader, op));
    free_region(reader, rr, rm);
    free_region(source, sr, sm);
    CHECK_OK(kvt_agent_destroy(reader));
    CHECK_OK(kvt_agent_destroy(source));
}

static void queued_notifications_are_dropped_with_the_agent(void) {
    uint32_t a = make_agent("drop-a"), b = make_agent("drop-b");
    uint64_t generation;
    uint32_t peer = load_peer(a, b, &generation);
    for (int i = 0; i < 5; i++) CHECK_OK(kvt_notify_send(a, peer, generation, (const uint8_t *)"hello", 5));
    wait_counter_at_least(b, KVT_COUNTER_PENDING_NOTIFICATIONS, 5);
    CHECK(counter(0, KVT_COUNTER_PENDING_NOTIFICATIONS) == 5, "five pending process-wide");
    CHECK_OK(kvt_agent_destroy(b));
    CHECK_OK(kvt_agent_destroy(a));
}

/* A send never waits for the sender's progress thread: sent while it is stalled, the call returns; over UCX
 * the thread sends what was queued once it runs again, in order, and the loopback backend delivers from the
 * calling thread at once. An agent destroyed with a send still queued sends it first. */
static void a_send_does_not_wait_for_the_progress_thread(void) {
    uint32_t a = make_agent("stalled-sender"), b = make_agent("stalled-receiver");
    uint64_t generation;
    uint32_t peer = load_peer(a, b, &generation);
    bool queued = test_backend == KVT_BACKEND_UCX;
    CHECK_OK(kvt_fault_stall_progress(a, 1));
    const char *messages[] = {"first", "second", "last"};
    for (int i = 0; i < 2; i++)
        CHECK_OK(kvt_notify_send(a, peer, generation, (const uint8_t *)messages[i], (uint32_t)strlen(messages[i])));
    CHECK(counter(a, KVT_COUNTER_NOTIFICATIONS_SENT) == 2, "both sends counted");
    CHECK(counter(b, KVT_COUNTER_PENDING_NOTIFICATIONS) == (queued ? 0 : 2),
          "%s while the sender's thread is stalled (%llu pending)", queued ? "nothing arrived" : "both arrived",
          (unsigned long long)counter(b, KVT_COUNTER_PENDING_NOTIFICATIONS));
    CHECK_OK(kvt_fault_stall_progress(a, 0));
    char sender[KVT_MAX_NAME + 1];
    static uint8_t data[KVT_MAX_NOTIFICATION];
    for (int i = 0; i < 2; i++) {
        uint32_t length = receive(b, sender, data);
        CHECK(length == strlen(messages[i]) && memcmp(data, messages[i], length) == 0, "message %d in order", i);
    }

    CHECK_OK(kvt_fault_stall_progress(a, 1));
    CHECK_OK(kvt_notify_send(a, peer, generation, (const uint8_t *)messages[2], (uint32_t)strlen(messages[2])));
    CHECK_OK(kvt_agent_destroy(a));
    uint32_t length = receive(b, sender, data);
    CHECK(length == strlen(messages[2]) && memcmp(data, messages[2], length) == 0, "the queued send went first");
    CHECK_OK(kvt_agent_destroy(b));
}

#if KVT_HAVE_UCX
#include <ucp/api/ucp.h>

/* The worker address inside a metadata blob (see the layout in metadata.c). */
static const uint8_t *blob_worker_address(const uint8_t *blob, size_t *length) {
    size_t offset = 4 + 2 + 2 + 8 + 8;
    size_t name_length = blob[offset] | (size_t)blob[offset + 1] << 8;
    offset += 2 + name_length;
    *length =
        blob[offset] | (size_t)blob[offset + 1] << 8 | (size_t)blob[offset + 2] << 16 | (size_t)blob[offset + 3] << 24;
    return blob + offset + 4;
}

static void wait_sent(ucp_worker_h worker, void *request) {
    CHECK(!UCS_PTR_IS_ERR(request), "ucp_am_send_nbx: %s", ucs_status_string(UCS_PTR_STATUS(request)));
    if (!request) return;
    while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucp_request_free(request);
}

typedef struct {
    uint32_t agent;
    ucp_worker_h worker;
} raw_sender;

/* Progresses the raw sender's worker while the agent waits for its message. */
static bool raw_notification_pending(void *context) {
    const raw_sender *sending = context;
    ucp_worker_progress(sending->worker);
    return counter(sending->agent, KVT_COUNTER_PENDING_NOTIFICATIONS) > 0;
}

/* A raw UCX sender (not an agent) sends malformed notifications: the agent drops and counts them. */
static void malformed_notifications_are_dropped(void) {
    ONLY_ON_BACKEND(KVT_BACKEND_UCX, "a raw sender exists only for UCX");
    uint32_t agent = make_agent("strict-receiver");
    uint64_t blob_length = 0;
    CHECK_OK(kvt_agent_metadata(agent, NULL, 0, &blob_length));
    uint8_t *blob = malloc(blob_length);
    CHECK_OK(kvt_agent_metadata(agent, blob, blob_length, &blob_length));

    ucp_config_t *config;
    CHECK(ucp_config_read(NULL, NULL, &config) == UCS_OK, "ucp_config_read");
    CHECK(ucp_config_modify(config, "MM_ERROR_HANDLING", "y") == UCS_OK, "ucp_config_modify");
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
    ucp_context_h context;
    CHECK(ucp_init(&params, config, &context) == UCS_OK, "ucp_init");
    ucp_config_release(config);
    ucp_worker_params_t worker_params = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                         .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_worker_h worker;
    CHECK(ucp_worker_create(context, &worker_params, &worker) == UCS_OK, "ucp_worker_create");
    size_t address_length;
    const uint8_t *address = blob_worker_address(blob, &address_length);
    ucp_ep_params_t ep_params = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                                 .address = (const ucp_address_t *)address,
                                 .err_mode = UCP_ERR_HANDLING_MODE_PEER};
    ucp_ep_h ep;
    CHECK(ucp_ep_create(worker, &ep_params, &ep) == UCS_OK, "ucp_ep_create");

    ucp_request_param_t eager = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_AM_SEND_FLAG_EAGER};
    static uint8_t payload[KVT_MAX_NOTIFICATION + 1];
    const uint8_t bad_magic[] = {'N', 'O', 'P', 'E', 1, 0, 'x'};
    const uint8_t good_header[] = {'K', 'V', 'T', 'N', 3, 0, 'r', 'a', 'w'};
    const uint8_t lying_length[] = {'K', 'V', 'T', 'N', 9, 0, 'r', 'a', 'w'};
    const uint8_t space_in_name[] = {'K', 'V', 'T', 'N', 3, 0, 'r', ' ', 'w'};
    wait_sent(worker, ucp_am_send_nbx(ep, 7, bad_magic, sizeof bad_magic, payload, 5, &eager));
    wait_sent(worker, ucp_am_send_nbx(ep, 7, lying_length, sizeof lying_length, payload, 5, &eager));
    wait_sent(worker, ucp_am_send_nbx(ep, 7, space_in_name, sizeof space_in_name, payload, 5, &eager));
    wait_sent(worker, ucp_am_send_nbx(ep, 7, good_header, sizeof good_header, payload, 0, &eager));
    wait_sent(worker, ucp_am_send_nbx(ep, 7, good_header, sizeof good_header, payload, sizeof payload, &eager));
    wait_sent(worker, ucp_am_send_nbx(ep, 7, good_header, sizeof good_header, (const uint8_t *)"fine", 4, &eager));
    char sender[KVT_MAX_NAME + 1];
    static uint8_t data[KVT_MAX_NOTIFICATION];
    raw_sender sending = {.agent = agent, .worker = worker};
    wait_until(agent, raw_notification_pending, &sending, "the raw sender's notification", WAIT_DEADLINE_MS);
    uint32_t length = receive(agent, sender, data);
    CHECK(strcmp(sender, "raw") == 0 && length == 4 && memcmp(data, "fine", 4) == 0, "the well-formed one arrives");
    CHECK(counter(agent, KVT_COUNTER_NOTIFICATIONS_DROPPED) == 5, "five malformed ones dropped (got %llu)",
          (unsigned long long)counter(agent, KVT_COUNTER_NOTIFICATIONS_DROPPED));
    CHECK(counter(agent, KVT_COUNTER_NOTIFICATIONS_RECEIVED) == 1, "one received");

    ucp_request_param_t close = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
    wait_sent(worker, ucp_ep_close_nbx(ep, &close));
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    free(blob);
    CHECK_OK(kvt_agent_destroy(agent));
}
#define UCX_ONLY_CASES , TEST(malformed_notifications_are_dropped)
#else
#define UCX_ONLY_CASES
#endif

TEST_MAIN("notify", TEST(send_and_poll), TEST(transfer_completion_notification),
          TEST(queued_notifications_are_dropped_with_the_agent),
          TEST(a_send_does_not_wait_for_the_progress_thread) UCX_ONLY_CASES)
