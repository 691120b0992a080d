/* libkvreuse_transport: the adoption sidecar's socket — where an engine hands kvreuse its KV memory.
 * Part of kvreuse_transport.h, which includes it; include that header. The protocol (messages, ownership
 * rules) is docs/engines.md; the engine's side is kvreuse_sidecar_client.h. */
#ifndef KVREUSE_SIDECAR_H
#define KVREUSE_SIDECAR_H

#ifndef KVREUSE_TRANSPORT_H
#error "kvreuse_sidecar.h is part of kvreuse_transport.h: include that header"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Adoption sidecar: a unix socket engines connect to, messages and passed file descriptors        */
/* ---------------------------------------------------------------------------------------------- */

/*
 * A listener is a unix SOCK_SEQPACKET socket bound at a path (mode 0600) that engines connect to. Each
 * packet is one message: up to KVT_SIDECAR_MAX_MESSAGE bytes (UTF-8 JSON by the protocol; the library
 * does not read it) with up to KVT_SIDECAR_MAX_FDS file descriptors passed with it (SCM_RIGHTS).
 * The library owns the socket: a thread of the listener accepts connections (only from processes of
 * this user, or root: others are closed at once), receives their messages and notices when they close,
 * and queues each as an event, announced through a wake-up pipe like an agent's (kvt_sidecar_wake_fd,
 * read as a socket by Node). kvt_sidecar_poll dequeues them; the caller answers with kvt_sidecar_send.
 * Listener and connection ids are never reused, so a stale one yields KVT_ERR_NOT_FOUND.
 */

#define KVT_SIDECAR_MAX_MESSAGE 65536u
#define KVT_SIDECAR_MAX_FDS 8u
#define KVT_SIDECAR_MAX_CONNECTIONS 256u
/* The longest socket path (struct sockaddr_un's sun_path, less its NUL). */
#define KVT_SIDECAR_MAX_PATH 107u

enum {
    /* A process connected. data: {"pid":N,"uid":N} (its SO_PEERCRED). */
    KVT_SIDECAR_EVENT_CONNECTED = 1,
    /* A message: data is its bytes, fds the descriptors passed with it (the caller's to close from now on). */
    KVT_SIDECAR_EVENT_MESSAGE = 2,
    /* A packet refused by the library (nothing delivered, descriptors closed); data: the reason, in words,
     * starting with a stable code: "message-too-large: ...", "too-many-fds: ..." or "empty-message: ...". */
    KVT_SIDECAR_EVENT_MALFORMED = 3,
    /* The connection ended (the engine closed it or died, or kvt_sidecar_disconnect): its last event. */
    KVT_SIDECAR_EVENT_CLOSED = 4,
};

/**
 * Binds a listener at `path` (1..KVT_SIDECAR_MAX_PATH bytes; the file must not exist) and starts its
 * thread. Errors: INVALID_PARAM (path), NOT_ALLOWED when the path exists (the detail says so), BACKEND
 * naming the failing call (socket, bind, listen, pthread_create). kvt_sidecar_close removes the file.
 */
KVT_API kvt_status kvt_sidecar_listen(const char *path, uint32_t *out_listener);

/** The read end of the listener's wake-up pipe (owned by the library, valid until kvt_sidecar_close). */
KVT_API kvt_status kvt_sidecar_wake_fd(uint32_t listener, int32_t *out_fd);

/**
 * Dequeues the oldest event, if any: *out_got is 1 and its kind (KVT_SIDECAR_EVENT_*), connection id,
 * data (at most `capacity` bytes: KVT_SIDECAR_MAX_MESSAGE always suffices; a smaller one that does not
 * hold the event's data is INVALID_PARAM and the event stays queued) and descriptors (`fds` must hold
 * KVT_SIDECAR_MAX_FDS) are written; or *out_got is 0. Events of one connection come in order, its
 * CLOSED last. Never waits.
 */
KVT_API kvt_status kvt_sidecar_poll(uint32_t listener, uint32_t *out_kind, uint32_t *out_connection, uint8_t *data,
                                    uint32_t capacity, uint32_t *out_length, int32_t *fds, uint32_t *out_fd_count,
                                    uint32_t *out_got);

/**
 * Sends one message (1..KVT_SIDECAR_MAX_MESSAGE bytes) on a connection, without waiting: BUSY when the
 * socket's buffer is full, REMOTE_DISCONNECT when the engine is gone, NOT_FOUND for a closed connection.
 */
KVT_API kvt_status kvt_sidecar_send(uint32_t listener, uint32_t connection, const uint8_t *data, uint32_t length);

/** Ends a connection from this side (its CLOSED event follows). NOT_FOUND when it already ended. */
KVT_API kvt_status kvt_sidecar_disconnect(uint32_t listener, uint32_t connection);

/**
 * Stops the listener's thread, closes every connection and the socket, removes the socket file, closes
 * the descriptors of events not polled, and frees the listener.
 */
KVT_API kvt_status kvt_sidecar_close(uint32_t listener);

#ifdef __cplusplus
}
#endif

#endif /* KVREUSE_SIDECAR_H */
