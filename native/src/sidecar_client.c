/* The engine's side of the adoption protocol (kvreuse_sidecar_client.h): a SOCK_SEQPACKET connection to
 * the sidecar, messages with descriptors passed along (SCM_RIGHTS), and the adopt exchange. */
#include "kvreuse_transport.h"

#include "services/status.h"
#include "sidecar.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

kvt_status kvt_sidecar_client_connect(const char *path, int32_t *out_socket) {
    kvt_detail_clear();
    struct sockaddr_un address;
    kvt_status checked = kvt_sidecar_address("kvt_sidecar_client_connect", path, &address);
    if (checked != KVT_OK) return checked;
    if (!out_socket) return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_client_connect: out_socket is NULL");
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return kvt_fail(KVT_ERR_BACKEND, "kvt_sidecar_client_connect: socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        int error = errno;
        close(fd);
        return kvt_fail(KVT_ERR_REMOTE_DISCONNECT, "kvt_sidecar_client_connect: no sidecar listens at %s: %s", path,
                        strerror(error));
    }
    *out_socket = fd;
    return KVT_OK;
}

/* A socket no call can use: poll ignores a negative descriptor (a receive would wait out its whole timeout). */
static kvt_status check_socket(const char *call, int32_t socket_fd) {
    if (socket_fd >= 0) return KVT_OK;
    return kvt_fail(KVT_ERR_INVALID_PARAM, "%s: socket %d is not a descriptor (kvt_sidecar_client_connect gives one)",
                    call, socket_fd);
}

kvt_status kvt_sidecar_client_send(int32_t socket_fd, const uint8_t *data, uint32_t length, const int32_t *fds,
                                   uint32_t fd_count) {
    kvt_detail_clear();
    kvt_status checked = check_socket("kvt_sidecar_client_send", socket_fd);
    if (checked != KVT_OK) return checked;
    if (!data || length == 0 || length > KVT_SIDECAR_MAX_MESSAGE)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_client_send: a message is 1..%u bytes (got %u)",
                        KVT_SIDECAR_MAX_MESSAGE, length);
    if (fd_count > KVT_SIDECAR_MAX_FDS || (fd_count > 0 && !fds))
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_client_send: at most %u descriptors (got %u)",
                        KVT_SIDECAR_MAX_FDS, fd_count);
    union {
        char bytes[CMSG_SPACE(sizeof(int) * KVT_SIDECAR_MAX_FDS)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct iovec vector = {.iov_base = (void *)(uintptr_t)data, .iov_len = length};
    struct msghdr message = {.msg_iov = &vector, .msg_iovlen = 1};
    if (fd_count > 0) {
        message.msg_control = control.bytes;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * fd_count);
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int) * fd_count);
        for (uint32_t i = 0; i < fd_count; i++) memcpy(CMSG_DATA(header) + i * sizeof(int), &fds[i], sizeof(int));
    }
    if (sendmsg(socket_fd, &message, MSG_NOSIGNAL) == (ssize_t)length) return KVT_OK;
    int error = errno;
    if (error == EPIPE || error == ECONNRESET || error == ENOTCONN)
        return kvt_fail(KVT_ERR_REMOTE_DISCONNECT, "kvt_sidecar_client_send: the sidecar is gone (%s)",
                        strerror(error));
    return kvt_fail(KVT_ERR_BACKEND, "kvt_sidecar_client_send: sendmsg: %s", strerror(error));
}

kvt_status kvt_sidecar_client_recv(int32_t socket_fd, uint8_t *data, uint32_t capacity, uint32_t *out_length,
                                   uint32_t timeout_ms) {
    kvt_detail_clear();
    kvt_status checked = check_socket("kvt_sidecar_client_recv", socket_fd);
    if (checked != KVT_OK) return checked;
    if (!data || capacity == 0 || !out_length)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_client_recv: no buffer");
    struct pollfd polled = {.fd = socket_fd, .events = POLLIN};
    int ready;
    do ready = poll(&polled, 1, timeout_ms > (uint32_t)INT32_MAX ? -1 : (int)timeout_ms);
    while (ready < 0 && errno == EINTR);
    if (ready == 0) return kvt_fail(KVT_ERR_TIMEOUT, "kvt_sidecar_client_recv: no answer within %u ms", timeout_ms);
    ssize_t received = recv(socket_fd, data, capacity, MSG_TRUNC);
    if (received == 0 || (received < 0 && errno == ECONNRESET))
        return kvt_fail(KVT_ERR_REMOTE_DISCONNECT, "kvt_sidecar_client_recv: the sidecar closed the connection");
    if (received < 0) return kvt_fail(KVT_ERR_BACKEND, "kvt_sidecar_client_recv: recv: %s", strerror(errno));
    if ((size_t)received > capacity) {
        *out_length = capacity;
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_client_recv: a message of %zd bytes was cut to %u",
                        received, capacity);
    }
    *out_length = (uint32_t)received;
    return KVT_OK;
}

/* Sends the adopt message with the memfd (none when negative: GPU memory, named by the layout's ipcHandle):
 * the status of the send (INVALID_PARAM when it does not fit). */
static kvt_status send_adopt(int32_t socket_fd, int32_t memfd, const char *layout_json) {
    size_t layout_length = strlen(layout_json);
    static const char head[] = "{\"type\":\"adopt\",\"version\":1,\"layout\":";
    size_t length = sizeof head - 1 + layout_length + 1;
    if (length > KVT_SIDECAR_MAX_MESSAGE)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_client_adopt: the layout makes a message of %zu bytes",
                        length);
    char *message = malloc(length + 1);
    if (!message) return kvt_fail(KVT_ERR_NO_MEMORY, "kvt_sidecar_client_adopt: out of memory");
    snprintf(message, length + 1, "%s%s}", head, layout_json);
    kvt_status status =
        kvt_sidecar_client_send(socket_fd, (const uint8_t *)message, (uint32_t)length, &memfd, memfd < 0 ? 0 : 1);
    free(message);
    return status;
}

kvt_status kvt_sidecar_client_adopt(int32_t socket_fd, int32_t memfd, const char *layout_json, char *answer,
                                    uint32_t capacity, uint32_t timeout_ms) {
    kvt_detail_clear();
    kvt_status checked = check_socket("kvt_sidecar_client_adopt", socket_fd);
    if (checked != KVT_OK) return checked;
    if (!layout_json || !answer || capacity < 2)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_client_adopt: a layout and an answer buffer are needed");
    kvt_status status = send_adopt(socket_fd, memfd, layout_json);
    if (status != KVT_OK) return status;
    uint32_t length = 0;
    status = kvt_sidecar_client_recv(socket_fd, (uint8_t *)answer, capacity - 1, &length, timeout_ms);
    if (status != KVT_OK && status != KVT_ERR_INVALID_PARAM) return status;
    answer[length] = '\0';
    if (strstr(answer, "\"type\":\"adopted\"")) return KVT_OK;
    return kvt_fail(KVT_ERR_NOT_ALLOWED, "%s", answer);
}

kvt_status kvt_sidecar_client_close(int32_t socket_fd) {
    kvt_detail_clear();
    if (close(socket_fd) != 0)
        return kvt_fail(KVT_ERR_INVALID_PARAM, "kvt_sidecar_client_close: %d: %s", socket_fd, strerror(errno));
    return KVT_OK;
}
