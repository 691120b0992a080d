/* libkvreuse_transport: the engine's side of the adoption protocol (docs/engines.md), for an engine in
 * C, C++ or Python (ctypes) that hands its KV memory to a kvreuse sidecar. Part of kvreuse_transport.h,
 * which includes it; include that header and link libkvreuse_transport.so. No agent is needed. */
#ifndef KVREUSE_SIDECAR_CLIENT_H
#define KVREUSE_SIDECAR_CLIENT_H

#ifndef KVREUSE_TRANSPORT_H
#error "kvreuse_sidecar_client.h is part of kvreuse_transport.h: include that header"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Adoption protocol: the engine's client                                                          */
/* ---------------------------------------------------------------------------------------------- */

/*
 * An engine keeps the connection open for as long as the sidecar may serve its memory: closing it (or
 * dying) tells the sidecar to withdraw the banks, fail their pins with "engine-gone", wait for reads in
 * flight and unmap its own mapping. The engine stays the owner of the memory throughout.
 * The calls taking the `socket` kvt_sidecar_client_connect returned refuse a negative one with INVALID_PARAM.
 */

/**
 * Connects to the sidecar listening at `path` (SOCK_SEQPACKET, close-on-exec) and returns the socket.
 * Errors: INVALID_PARAM (path), REMOTE_DISCONNECT when nothing listens there (the detail says why).
 */
KVT_API kvt_status kvt_sidecar_client_connect(const char *path, int32_t *out_socket);

/**
 * Sends one message (1..KVT_SIDECAR_MAX_MESSAGE bytes) with `fd_count` (0..KVT_SIDECAR_MAX_FDS)
 * descriptors, which the engine keeps (the sidecar gets duplicates). REMOTE_DISCONNECT when the sidecar
 * is gone; BACKEND for another refusal of sendmsg.
 */
KVT_API kvt_status kvt_sidecar_client_send(int32_t socket, const uint8_t *data, uint32_t length, const int32_t *fds,
                                           uint32_t fd_count);

/**
 * Receives one message into `data` (capacity bytes; a longer one is cut and INVALID_PARAM), waiting at
 * most `timeout_ms`: TIMEOUT when none came, REMOTE_DISCONNECT when the sidecar closed the connection.
 */
KVT_API kvt_status kvt_sidecar_client_recv(int32_t socket, uint8_t *data, uint32_t capacity, uint32_t *out_length,
                                           uint32_t timeout_ms);

/**
 * Hands memory to the sidecar: sends {"type":"adopt","version":1,"layout":<layout_json>} with
 * `memfd` (a memfd sealed with F_SEAL_SHRINK whose pages hold the banks as the layout says), or with no
 * descriptor when `memfd` is negative (GPU memory: the layout's "memory":"vram", "device" and "ipcHandle",
 * the base64 of the allocation's cuIpcGetMemHandle, name it), waits at most
 * `timeout_ms` for the answer and copies it, NUL-terminated, into `answer` (capacity bytes, cut to fit).
 * KVT_OK when the answer is "adopted"; NOT_ALLOWED when it is "refused" (the detail is the answer);
 * the errors of send and recv otherwise.
 */
KVT_API kvt_status kvt_sidecar_client_adopt(int32_t socket, int32_t memfd, const char *layout_json, char *answer,
                                            uint32_t capacity, uint32_t timeout_ms);

/** Closes the connection: the sidecar withdraws what it adopted from it. */
KVT_API kvt_status kvt_sidecar_client_close(int32_t socket);

#ifdef __cplusplus
}
#endif

#endif /* KVREUSE_SIDECAR_CLIENT_H */
