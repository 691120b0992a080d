/* The adoption sidecar's listener (kvreuse_sidecar.h): a unix SOCK_SEQPACKET socket whose own thread
 * accepts engines' connections, receives their messages with the descriptors passed along (SCM_RIGHTS)
 * and queues them as events for the caller, announced through a wake-up pipe. The thread alone closes
 * connection sockets, so a descriptor number is never reused under a caller's send. */
#include "kvreuse_transport.h"

#include "services/status.h"
#include "sidecar.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_LISTENERS 64u

typedef struct sidecar_event {
    struct sidecar_event *next;
    uint32_t kind, connection, length, fd_count;
    int32_t fds[KVT_SIDECAR_MAX_FDS];
    uint8_t data[];
} sidecar_event;

typedef struct {
    uint32_t id;
    int fd;
} sidecar_connection;

typedef struct {
    uint32_t id;
    char path[KVT_SIDECAR_MAX_PATH + 1];
    int socket_fd;
    int stop_pipe[2];
    int wake_pipe[2];
    pthread_t thread;
    pthread_mutex_t lock; /* the connections and the queue */
    sidecar_connection connections[KVT_SIDECAR_MAX_CONNECTIONS];
    uint32_t connection_count;
    uint32_t next_connection;
    sidecar_event *head, *tail;
    uint8_t buffer[KVT_SIDECAR_MAX_MESSAGE + 1]; /* the thread's receive buffer: one more byte spots a cut */
} sidecar_listener;

/* Held for the whole of every call naming a listener (none waits), so a closed listener is never in use. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static sidecar_listener *listeners[MAX_LISTENERS];
static uint32_t next_listener_id;

static sidecar_listener *find_locked(uint32_t id, const char *call) {
    for (uint32_t i = 0; i < MAX_LISTENERS; i++)
        if (listeners[i] && listeners[i]->id == id) return listeners[i];
    kvt_fail(KVT_ERR_NOT_FOUND, "%s: no sidecar listener %u", call, id);
    return NULL;
}

/* ---- the listener's thread ------------------------------------------------------------------------- */

static void enqueue(sidecar_listener *listener, uint32_t kind, uint32_t connection, const void *data, uint32_t length,
                    const int32_t *fds, uint32_t fd_count) {
    sidecar_event *event = malloc(sizeof *event + length);
    if (!event) { /* nothing can carry it: the descriptors must not leak */
        for (uint32_t i = 0; i < fd_count; i++) close(fds[i]);
        return;
    }
    *event = (sidecar_event){.kind = kind, .connection = connection, .length = length, .fd_count = fd_count};
    if (length > 0) memcpy(event->data, data, length);
    if (fd_count > 0) memcpy(event->fds, fds, fd_count * sizeof *fds);
    pthread_mutex_lock(&listener->lock);
    bool was_empty = listener->head == NULL;
    if (listener->tail)
        listener->tail->next = event;
    else
        listener->head = event;
    listener->tail = event;
    pthread_mutex_unlock(&listener->lock);
    if (was_empty) {
        ssize_t written = write(listener->wake_pipe[1], "!", 1);
        (void)written; /* a full pipe already wakes the reader */
    }
}

static void enqueue_text(sidecar_listener *listener, uint32_t kind, uint32_t connection, const char *text) {
    enqueue(listener, kind, connection, text, (uint32_t)strlen(text), NULL, 0);
}

static void accept_one(sidecar_listener *listener) {
    int fd = accept4(listener->socket_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    struct ucred peer = {0};
    socklen_t size = sizeof peer;
    bool allowed = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 &&
                   (peer.uid == getuid() || peer.uid == 0) && listener->connection_count < KVT_SIDECAR_MAX_CONNECTIONS;
    if (!allowed) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&listener->lock);
    uint32_t id = ++listener->next_connection;
    listener->connections[listener->connection_count++] = (sidecar_connection){.id = id, .fd = fd};
    pthread_mutex_unlock(&listener->lock);
    char text[64];
    snprintf(text, sizeof text, "{\"pid\":%ld,\"uid\":%lu}", (long)peer.pid, (unsigned long)peer.uid);
    enqueue_text(listener, KVT_SIDECAR_EVENT_CONNECTED, id, text);
}

static void end_connection(sidecar_listener *listener, uint32_t index) {
    pthread_mutex_lock(&listener->lock);
    sidecar_connection connection = listener->connections[index];
    listener->connections[index] = listener->connections[--listener->connection_count];
    close(connection.fd);
    pthread_mutex_unlock(&listener->lock);
    enqueue(listener, KVT_SIDECAR_EVENT_CLOSED, connection.id, NULL, 0, NULL, 0);
}

/* The descriptors of every SCM_RIGHTS message in `message` (at most KVT_SIDECAR_MAX_FDS fit its buffer). */
static uint32_t received_fds(struct msghdr *message, int32_t *fds) {
    uint32_t count = 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(message); header; header = CMSG_NXTHDR(message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        uint32_t n = (uint32_t)((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (uint32_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(header) + i * sizeof fd, sizeof fd);
            if (count < KVT_SIDECAR_MAX_FDS)
                fds[count++] = fd;
            else
                close(fd);
        }
    }
    return count;
}

static void close_fds(const int32_t *fds, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) close(fds[i]);
}

/* Receives one packet of connection `index`; false when the connection ended (and was removed). */
static bool receive_one(sidecar_listener *listener, uint32_t index) {
    sidecar_connection connection = listener->connections[index];
    union {
        char bytes[CMSG_SPACE(sizeof(int) * KVT_SIDECAR_MAX_FDS)];
        struct cmsghdr align;
    } control;
    struct iovec vector = {.iov_base = listener->buffer, .iov_len = sizeof listener->buffer};
    struct msghdr message = {
        .msg_iov = &vector, .msg_iovlen = 1, .msg_control = control.bytes, .msg_controllen = sizeof control.bytes};
    ssize_t received = recvmsg(connection.fd, &message, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (received < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    int32_t fds[KVT_SIDECAR_MAX_FDS];
    uint32_t fd_count = received < 0 ? 0 : received_fds(&message, fds);
    if (received <= 0 && fd_count == 0) {
        end_connection(listener, index);
        return false;
    }
    char why[160];
    if ((message.msg_flags & MSG_TRUNC) || received > (ssize_t)KVT_SIDECAR_MAX_MESSAGE)
        snprintf(why, sizeof why, "message-too-large: a message holds at most %u bytes", KVT_SIDECAR_MAX_MESSAGE);
    else if (message.msg_flags & MSG_CTRUNC)
        snprintf(why, sizeof why, "too-many-fds: a message passes at most %u descriptors", KVT_SIDECAR_MAX_FDS);
    else if (received == 0)
        snprintf(why, sizeof why, "empty-message: descriptors passed without a message");
    else {
        enqueue(listener, KVT_SIDECAR_EVENT_MESSAGE, connection.id, listener->buffer, (uint32_t)received, fds,
                fd_count);
        return true;
    }
    close_fds(fds, fd_count);
    enqueue_text(listener, KVT_SIDECAR_EVENT_MALFORMED, connection.id, why);
    return true;
}

static void *listener_main(void *argument) {
    sidecar_listener *listener = argument;
    struct pollfd polled[2 + KVT_SIDECAR_MAX_CONNECTIONS];
    for (;;) {
        polled[0] = (struct pollfd){.fd = listener->stop_pipe[0], .events = POLLIN};
        polled[1] = (struct pollfd){.fd = listener->socket_fd, .events = POLLIN};
        uint32_t count = listener->connection_count; /* only this thread changes it */
        for (uint32_t i = 0; i < count; i++)
            polled[2 + i] = (struct pollfd){.fd = listener->connections[i].fd, .events = POLLIN};
        if (poll(polled, 2 + count, -1) < 0) continue; /* EINTR */
        if (polled[0].revents) return NULL;
        /* Backwards, so that a connection removed (the last one moved into its place) was already seen. */
        for (uint32_t i = count; i-- > 0;)
            if (polled[2 + i].revents) receive_one(listener, i);
        if (polled[1].revents & POLLIN) accept_one(listener);
    }
}

/* ---- the calls ------------------------------------------------------------------------------------- */

static kvt_status open_pipes(sidecar_listener *listener) {
    if (pipe2(listener->stop_pipe, O_CLOEXEC) != 0) return kvt_fail(KVT_ERR_BACKEND, "pipe2: %s", strerror(errno));
    if (pipe2(listener->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        int error = errno;
        close(listener->stop_pipe[0]);
        close(listener->stop_pipe[1]);
        return kvt_fail(KVT_ERR_BACKEND, "pipe2: %s", strerror(error));
    }
    return KVT_OK;
}

static void close_pipes(sidecar_listener *listener) {
    close(listener->stop_pipe[0]);
    close(listener->stop_pipe[1]);
    close(listener->wake_pipe[0]);
    close(listener->wake_pipe[1]);
}

kvt_status kvt_sidecar_address(const char *call, const char *path, struct sockaddr_un *out) {
    size_t length = path ? strnlen(path, KVT_SIDECAR_MAX_PATH + 1) : 0;
    if (length == 0 || length > KVT_SIDECAR_MAX_PATH)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: the path must be 1..%u bytes (got %zu)", call, KVT_SIDECAR_MAX_PATH,
                        length);
    *out = (struct sockaddr_un){.sun_family = AF_UNIX};
    memcpy(out->sun_path, path, length + 1);
    return KVT_OK;
}

static kvt_status bind_socket(sidecar_listener *listener) {
    struct sockaddr_un address;
    kvt_sidecar_address("kvt_sidecar_listen", listener->path, &address);
    listener->socket_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listener->socket_fd < 0) return kvt_fail(KVT_ERR_BACKEND, "kvt_sidecar_listen: socket: %s", strerror(errno));
    const char *failed = NULL;
    if (bind(listener->socket_fd, (struct sockaddr *)&address, sizeof address) != 0)
        failed = "bind";
    else if (chmod(listener->path, 0600) != 0 || listen(listener->socket_fd, 64) != 0)
        failed = "listen";
    if (!failed) return KVT_OK;
    int error = errno;
    if (strcmp(failed, "bind") != 0) unlink(listener->path);
    close(listener->socket_fd);
    return kvt_fail(error == EADDRINUSE ? KVT_ERR_NOT_ALLOWED : KVT_ERR_BACKEND, "kvt_sidecar_listen: %s of %s: %s",
                    failed, listener->path, strerror(error));
}

static kvt_status start_listener(sidecar_listener *listener) {
    kvt_status status = open_pipes(listener);
    if (status != KVT_OK) return status;
    status = bind_socket(listener);
    if (status == KVT_OK) {
        int rc = pthread_create(&listener->thread, NULL, listener_main, listener);
        if (rc == 0) return KVT_OK;
        unlink(listener->path);
        close(listener->socket_fd);
        status = kvt_fail(KVT_ERR_BACKEND, "kvt_sidecar_listen: pthread_create: %s", strerror(rc));
    }
    close_pipes(listener);
    return status;
}

kvt_status kvt_sidecar_listen(const char *path, uint32_t *out_listener) {
    kvt_detail_clear();
    struct sockaddr_un address;
    kvt_status checked = kvt_sidecar_address("kvt_sidecar_listen", path, &address);
    if (checked != KVT_OK) return checked;
    if (!out_listener) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_listen: out_listener is NULL");
    struct stat existing;
    if (lstat(path, &existing) == 0)
        return kvt_fail(KVT_ERR_NOT_ALLOWED, "kvt_sidecar_listen: %s exists: remove it first if no sidecar uses it",
                        path);
    sidecar_listener *listener = calloc(1, sizeof *listener);
    if (!listener) return kvt_fail(KVT_ERR_NO_MEMORY, "kvt_sidecar_listen: out of memory");
    memcpy(listener->path, address.sun_path, sizeof listener->path);
    pthread_mutex_init(&listener->lock, NULL);
    pthread_mutex_lock(&table_lock);
    uint32_t slot = 0;
    while (slot < MAX_LISTENERS && listeners[slot]) slot++;
    kvt_status status = slot == MAX_LISTENERS
                            ? kvt_fail(KVT_ERR_NOT_ALLOWED, "kvt_sidecar_listen: %u listeners are open", MAX_LISTENERS)
                            : start_listener(listener);
    if (status == KVT_OK) {
        listener->id = ++next_listener_id;
        listeners[slot] = listener;
        *out_listener = listener->id;
    }
    pthread_mutex_unlock(&table_lock);
    if (status != KVT_OK) {
        pthread_mutex_destroy(&listener->lock);
        free(listener);
    }
    return status;
}

kvt_status kvt_sidecar_wake_fd(uint32_t id, int32_t *out_fd) {
    kvt_detail_clear();
    if (!out_fd) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_wake_fd: out_fd is NULL");
    pthread_mutex_lock(&table_lock);
    sidecar_listener *listener = find_locked(id, "kvt_sidecar_wake_fd");
    if (listener) *out_fd = listener->wake_pipe[0];
    pthread_mutex_unlock(&table_lock);
    return listener ? KVT_OK : KVT_ERR_NOT_FOUND;
}

static kvt_status take_event(sidecar_listener *listener, uint32_t *out_kind, uint32_t *out_connection, uint8_t *data,
                             uint32_t capacity, uint32_t *out_length, int32_t *fds, uint32_t *out_fd_count,
                             uint32_t *out_got) {
    pthread_mutex_lock(&listener->lock);
    sidecar_event *event = listener->head;
    *out_got = 0;
    if (event && event->length > capacity) {
        uint32_t needed = event->length;
        pthread_mutex_unlock(&listener->lock);
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_poll: the event holds %u bytes, capacity is %u", needed,
                        capacity);
    }
    if (event) {
        listener->head = event->next;
        if (!listener->head) listener->tail = NULL;
    }
    bool more = listener->head != NULL;
    pthread_mutex_unlock(&listener->lock);
    if (!event) return KVT_OK;
    *out_kind = event->kind;
    *out_connection = event->connection;
    *out_length = event->length;
    *out_fd_count = event->fd_count;
    if (event->length > 0) memcpy(data, event->data, event->length);
    if (event->fd_count > 0) memcpy(fds, event->fds, event->fd_count * sizeof *fds);
    *out_got = 1;
    free(event);
    if (more) {
        ssize_t written = write(listener->wake_pipe[1], "!", 1);
        (void)written;
    }
    return KVT_OK;
}

kvt_status kvt_sidecar_poll(uint32_t id, uint32_t *out_kind, uint32_t *out_connection, uint8_t *data, uint32_t capacity,
                            uint32_t *out_length, int32_t *fds, uint32_t *out_fd_count, uint32_t *out_got) {
    kvt_detail_clear();
    if (!out_kind || !out_connection || (!data && capacity > 0) || !out_length || !fds || !out_fd_count || !out_got)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_poll: an out pointer is NULL");
    pthread_mutex_lock(&table_lock);
    sidecar_listener *listener = find_locked(id, "kvt_sidecar_poll");
    kvt_status status = listener ? take_event(listener, out_kind, out_connection, data, capacity, out_length, fds,
                                              out_fd_count, out_got)
                                 : KVT_ERR_NOT_FOUND;
    pthread_mutex_unlock(&table_lock);
    return status;
}

/* The socket of a live connection (listener->lock held), or -1. */
static int connection_fd_locked(sidecar_listener *listener, uint32_t connection) {
    for (uint32_t i = 0; i < listener->connection_count; i++)
        if (listener->connections[i].id == connection) return listener->connections[i].fd;
    return -1;
}

static kvt_status send_on(sidecar_listener *listener, uint32_t connection, const uint8_t *data, uint32_t length) {
    pthread_mutex_lock(&listener->lock);
    int fd = connection_fd_locked(listener, connection);
    ssize_t sent = fd < 0 ? -1 : send(fd, data, length, MSG_DONTWAIT | MSG_NOSIGNAL);
    int error = errno;
    pthread_mutex_unlock(&listener->lock);
    if (fd < 0) return kvt_fail(KVT_ERR_NOT_FOUND, "kvt_sidecar_send: connection %u has ended", connection);
    if (sent == (ssize_t)length) return KVT_OK;
    if (error == EAGAIN || error == EWOULDBLOCK)
        return kvt_fail(KVT_ERR_BUSY, "kvt_sidecar_send: connection %u: the socket's buffer is full", connection);
    if (error == EPIPE || error == ECONNRESET || error == ENOTCONN)
        return kvt_fail(KVT_ERR_REMOTE_DISCONNECT, "kvt_sidecar_send: connection %u: the engine is gone", connection);
    return kvt_fail(KVT_ERR_BACKEND, "kvt_sidecar_send: connection %u: %s", connection, strerror(error));
}

kvt_status kvt_sidecar_send(uint32_t id, uint32_t connection, const uint8_t *data, uint32_t length) {
    kvt_detail_clear();
    if (!data || length == 0 || length > KVT_SIDECAR_MAX_MESSAGE)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_send: a message is 1..%u bytes (got %u)",
                        KVT_SIDECAR_MAX_MESSAGE, length);
    pthread_mutex_lock(&table_lock);
    sidecar_listener *listener = find_locked(id, "kvt_sidecar_send");
    kvt_status status = listener ? send_on(listener, connection, data, length) : KVT_ERR_NOT_FOUND;
    pthread_mutex_unlock(&table_lock);
    return status;
}

kvt_status kvt_sidecar_disconnect(uint32_t id, uint32_t connection) {
    kvt_detail_clear();
    pthread_mutex_lock(&table_lock);
    sidecar_listener *listener = find_locked(id, "kvt_sidecar_disconnect");
    kvt_status status = KVT_ERR_NOT_FOUND;
    if (listener) {
        pthread_mutex_lock(&listener->lock);
        int fd = connection_fd_locked(listener, connection);
        if (fd >= 0) shutdown(fd, SHUT_RDWR); /* the thread sees the end, closes it and reports CLOSED */
        pthread_mutex_unlock(&listener->lock);
        status = fd >= 0 ? KVT_OK
                         : kvt_fail(KVT_ERR_NOT_FOUND, "kvt_sidecar_disconnect: connection %u has ended", connection);
    }
    pthread_mutex_unlock(&table_lock);
    return status;
}

kvt_status kvt_sidecar_close(uint32_t id) {
    kvt_detail_clear();
    pthread_mutex_lock(&table_lock);
    sidecar_listener *listener = find_locked(id, "kvt_sidecar_close");
    for (uint32_t i = 0; listener && i < MAX_LISTENERS; i++)
        if (listeners[i] == listener) listeners[i] = NULL;
    pthread_mutex_unlock(&table_lock);
    if (!listener) return KVT_ERR_NOT_FOUND;
    ssize_t written = write(listener->stop_pipe[1], "!", 1);
    (void)written;
    pthread_join(listener->thread, NULL);
    for (uint32_t i = 0; i < listener->connection_count; i++) close(listener->connections[i].fd);
    for (sidecar_event *event = listener->head, *next; event; event = next) {
        next = event->next;
        close_fds(event->fds, event->fd_count);
        free(event);
    }
    close(listener->socket_fd);
    unlink(listener->path);
    close_pipes(listener);
    pthread_mutex_destroy(&listener->lock);
    free(listener);
    return KVT_OK;
}
