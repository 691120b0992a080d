/* The adoption sidecar's socket and its reference client: an engine connects, hands over a memfd with its
 * layout and gets the answer; the listener sees the connection (with the engine's pid), the message and a
 * descriptor of the same memory, then the end of the connection; packets the library refuses (too large,
 * too many descriptors) are reported with their reason and no descriptor kept. */
#include "harness.h"

#include <poll.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define LENGTH (64u * 1024u)

typedef struct {
    uint32_t kind, connection, length, fd_count;
    int32_t fds[KVT_SIDECAR_MAX_FDS];
    uint8_t data[KVT_SIDECAR_MAX_MESSAGE + 1];
} event;

static void socket_path(char *path, size_t size, const char *name) {
    snprintf(path, size, "/tmp/kvt-sidecar-%s-%ld.sock", name, (long)getpid());
}

/* The next event of `listener`, waiting on its wake-up pipe (the deadline only guards against a hang). */
static void next_event(uint32_t listener, event *out) {
    int32_t wake;
    CHECK_OK(kvt_sidecar_wake_fd(listener, &wake));
    for (int round = 0; round < 600; round++) {
        uint32_t got = 0;
        CHECK_OK(kvt_sidecar_poll(listener, &out->kind, &out->connection, out->data, KVT_SIDECAR_MAX_MESSAGE,
                                  &out->length, out->fds, &out->fd_count, &got));
        if (got) {
            out->data[out->length] = '\0';
            return;
        }
        struct pollfd polled = {.fd = wake, .events = POLLIN};
        if (poll(&polled, 1, 100) > 0) {
            char bytes[64];
            CHECK(read(wake, bytes, sizeof bytes) > 0, "reading the wake-up pipe");
        }
    }
    CHECK(false, "no sidecar event within a minute");
}

static void engine_hands_over_a_memfd_and_the_listener_maps_the_same_memory(void) {
    char path[108];
    socket_path(path, sizeof path, "adopt");
    uint32_t listener;
    CHECK_OK(kvt_sidecar_listen(path, &listener));
    struct stat info;
    CHECK(stat(path, &info) == 0 && (info.st_mode & 0777) == 0600, "the socket is the user's alone");
    int32_t engine;
    CHECK_OK(kvt_sidecar_client_connect(path, &engine));
    event seen;
    next_event(listener, &seen);
    char expected[64];
    snprintf(expected, sizeof expected, "{\"pid\":%ld,", (long)getpid());
    CHECK(seen.kind == KVT_SIDECAR_EVENT_CONNECTED && strstr((char *)seen.data, expected), "connected: %s", seen.data);
    uint32_t connection = seen.connection;

    int memfd;
    uint8_t *memory = file_memory_map(LENGTH, &memfd);
    memset(memory, 0x5a, LENGTH);
    static const char answer_text[] = "{\"type\":\"adopted\",\"version\":1,\"banks\":[]}";
    /* The answer is queued before the engine waits for it: a SEQPACKET socket keeps it. */
    CHECK_OK(kvt_sidecar_client_send(engine, (const uint8_t *)"{\"type\":\"hello\"}", 16, NULL, 0));
    next_event(listener, &seen);
    CHECK(seen.kind == KVT_SIDECAR_EVENT_MESSAGE && seen.fd_count == 0, "a message without descriptors");
    CHECK_OK(kvt_sidecar_send(listener, connection, (const uint8_t *)answer_text, sizeof answer_text - 1));
    char answer[256];
    CHECK_OK(kvt_sidecar_client_adopt(engine, memfd, "{\"bytes\":65536}", answer, sizeof answer, 60000));
    CHECK(strcmp(answer, answer_text) == 0, "the answer: %s", answer);
    next_event(listener, &seen);
    CHECK(seen.kind == KVT_SIDECAR_EVENT_MESSAGE && seen.connection == connection && seen.fd_count == 1,
          "the adopt message with one descriptor");
    CHECK(strcmp((char *)seen.data, "{\"type\":\"adopt\",\"version\":1,\"layout\":{\"bytes\":65536}}") == 0,
          "adopt: %s", seen.data);
    uint8_t *adopted = mmap(NULL, LENGTH, PROT_READ, MAP_SHARED, seen.fds[0], 0);
    CHECK(adopted != MAP_FAILED, "the passed memfd maps");
    memory[LENGTH - 1] = 0xa5;
    CHECK(adopted[0] == 0x5a && adopted[LENGTH - 1] == 0xa5, "the same pages, not a copy");
    munmap(adopted, LENGTH);
    close(seen.fds[0]);

    /* GPU memory is named by the layout (its CUDA IPC handle): a negative memfd passes no descriptor. */
    CHECK_OK(kvt_sidecar_send(listener, connection, (const uint8_t *)answer_text, sizeof answer_text - 1));
    CHECK_OK(kvt_sidecar_client_adopt(engine, -1, "{\"memory\":\"vram\"}", answer, sizeof answer, 60000));
    next_event(listener, &seen);
    CHECK(seen.kind == KVT_SIDECAR_EVENT_MESSAGE && seen.fd_count == 0, "the adopt of GPU memory, no descriptor");

    CHECK_OK(kvt_sidecar_client_close(engine));
    next_event(listener, &seen);
    CHECK(seen.kind == KVT_SIDECAR_EVENT_CLOSED && seen.connection == connection, "closed after the engine left");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_sidecar_send(listener, connection, (const uint8_t *)"x", 1));
    CHECK_OK(kvt_sidecar_close(listener));
    CHECK(stat(path, &info) != 0, "the socket file is removed");
    CHECK_STATUS(KVT_ERR_NOT_FOUND, kvt_sidecar_close(listener));
    munmap(memory, LENGTH);
    close(memfd);
}

static void packets_the_library_refuses_are_reported_with_their_reason(void) {
    char path[108];
    socket_path(path, sizeof path, "refuse");
    uint32_t listener;
    CHECK_OK(kvt_sidecar_listen(path, &listener));
    uint32_t second;
    CHECK_STATUS(KVT_ERR_NOT_ALLOWED, kvt_sidecar_listen(path, &second));
    CHECK_DETAIL("exists");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_sidecar_listen("", &second));
    int32_t engine;
    CHECK_OK(kvt_sidecar_client_connect(path, &engine));
    event seen;
    next_event(listener, &seen);
    uint32_t connection = seen.connection;

    int fd = memfd_create("refused", MFD_CLOEXEC);
    int32_t fds[KVT_SIDECAR_MAX_FDS + 1];
    for (uint32_t i = 0; i <= KVT_SIDECAR_MAX_FDS; i++) fds[i] = fd;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_sidecar_client_send(engine, (const uint8_t *)"{}", 2, fds, 9));
    /* Past the client's own checks: a raw packet too large. */
    uint8_t *large = calloc(1, KVT_SIDECAR_MAX_MESSAGE + 1);
    CHECK(send(engine, large, KVT_SIDECAR_MAX_MESSAGE + 1, 0) == KVT_SIDECAR_MAX_MESSAGE + 1, "a large packet");
    free(large);
    next_event(listener, &seen);
    CHECK(seen.kind == KVT_SIDECAR_EVENT_MALFORMED && seen.connection == connection && seen.fd_count == 0 &&
              strncmp((char *)seen.data, "message-too-large:", 18) == 0,
          "too large: %s", seen.data);

    /* Nine descriptors in one packet: the listener takes none of them and says why. */
    union {
        char bytes[CMSG_SPACE(sizeof(int) * (KVT_SIDECAR_MAX_FDS + 1))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct iovec vector = {.iov_base = (void *)"{}", .iov_len = 2};
    struct msghdr packet = {
        .msg_iov = &vector, .msg_iovlen = 1, .msg_control = control.bytes, .msg_controllen = sizeof control.bytes};
    struct cmsghdr *header = CMSG_FIRSTHDR(&packet);
    *header = (struct cmsghdr){.cmsg_level = SOL_SOCKET,
                               .cmsg_type = SCM_RIGHTS,
                               .cmsg_len = CMSG_LEN(sizeof(int) * (KVT_SIDECAR_MAX_FDS + 1))};
    memcpy(CMSG_DATA(header), fds, sizeof(int) * (KVT_SIDECAR_MAX_FDS + 1));
    CHECK(sendmsg(engine, &packet, 0) == 2, "a packet of nine descriptors");
    next_event(listener, &seen);
    CHECK(seen.kind == KVT_SIDECAR_EVENT_MALFORMED && seen.fd_count == 0 &&
              strncmp((char *)seen.data, "too-many-fds:", 13) == 0,
          "too many descriptors: %s", seen.data);

    CHECK_OK(kvt_sidecar_disconnect(listener, connection));
    next_event(listener, &seen);
    CHECK(seen.kind == KVT_SIDECAR_EVENT_CLOSED && seen.connection == connection, "closed from the sidecar's side");
    char answer[64];
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT, kvt_sidecar_client_adopt(engine, fd, "{}", answer, sizeof answer, 60000));
    CHECK_OK(kvt_sidecar_client_close(engine));

    /* A refusal comes back as NOT_ALLOWED with the answer as the detail. */
    CHECK_OK(kvt_sidecar_client_connect(path, &engine));
    next_event(listener, &seen);
    static const char refusal[] = "{\"type\":\"refused\",\"reason\":\"bad-layout\",\"message\":\"no geometry\"}";
    CHECK_OK(kvt_sidecar_send(listener, seen.connection, (const uint8_t *)refusal, sizeof refusal - 1));
    CHECK_STATUS(KVT_ERR_NOT_ALLOWED, kvt_sidecar_client_adopt(engine, fd, "{}", answer, sizeof answer, 60000));
    CHECK_DETAIL("bad-layout");
    CHECK_OK(kvt_sidecar_client_close(engine));
    CHECK_OK(kvt_sidecar_close(listener)); /* the adopt message and its descriptor were never polled */
    close(fd);
}

static void a_client_finds_no_sidecar_where_none_listens(void) {
    int32_t engine;
    CHECK_STATUS(KVT_ERR_REMOTE_DISCONNECT, kvt_sidecar_client_connect("/tmp/kvt-sidecar-none.sock", &engine));
    CHECK_DETAIL("no sidecar listens");
}

/* A socket that is no descriptor at all (a failed connect's -1) is refused at once, naming it: poll ignores a
 * negative descriptor, so a receive used to wait out its whole timeout (for ever past 2^31 - 1 ms) and answer
 * TIMEOUT, and a send answered BACKEND with sendmsg's EBADF. */
static void a_negative_socket_is_refused(void) {
    uint8_t data[16] = "hello";
    uint32_t length = 0;
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_sidecar_client_recv(-1, data, sizeof data, &length, 0));
    CHECK_DETAIL("socket -1");
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_sidecar_client_send(-1, data, 5, NULL, 0));
    CHECK_DETAIL("socket -1");
    char answer[64];
    CHECK_STATUS(KVT_ERR_INVALID_PARAM, kvt_sidecar_client_adopt(-1, -1, "{}", answer, sizeof answer, 0));
    CHECK_DETAIL("socket -1");
}

TEST_MAIN("sidecar", TEST(engine_hands_over_a_memfd_and_the_listener_maps_the_same_memory),
          TEST(packets_the_library_refuses_are_reported_with_their_reason),
          TEST(a_client_finds_no_sidecar_where_none_listens), TEST(a_negative_socket_is_refused))
