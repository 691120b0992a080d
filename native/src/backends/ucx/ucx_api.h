/* The UCX functions the ucx backend calls, resolved from libucp.so.0 when the backend is first used
 * (ucx_api.c), so that the library itself does not link UCX and its loopback backend runs where UCX is
 * not installed. Included through ucx_state.h by the backend's files only: each ucp_* / ucs_* name below becomes a call through the table,
 * so the calls read as UCX's own. */
#ifndef KVT_UCX_API_H
#define KVT_UCX_API_H

#include <ucp/api/ucp.h>

/* The soname dlopen asks for (UCX 1.x); its dependency libucs.so.0 comes with it. */
#define KVT_UCX_LIBRARY "libucp.so.0"

#define KVT_UCX_FUNCTIONS(X)                                                                                           \
    X(ucp_am_recv_data_nbx)                                                                                            \
    X(ucp_am_send_nbx)                                                                                                 \
    X(ucp_cleanup)                                                                                                     \
    X(ucp_config_modify)                                                                                               \
    X(ucp_config_print)                                                                                                \
    X(ucp_config_read)                                                                                                 \
    X(ucp_config_release)                                                                                              \
    X(ucp_ep_close_nbx)                                                                                                \
    X(ucp_ep_create)                                                                                                   \
    X(ucp_ep_flush_nbx)                                                                                                \
    X(ucp_ep_print_info)                                                                                               \
    X(ucp_ep_rkey_unpack)                                                                                              \
    X(ucp_get_nbx)                                                                                                     \
    X(ucp_init_version)                                                                                                \
    X(ucp_mem_map)                                                                                                     \
    X(ucp_mem_query)                                                                                                   \
    X(ucp_mem_unmap)                                                                                                   \
    X(ucp_put_nbx)                                                                                                     \
    X(ucp_request_cancel)                                                                                              \
    X(ucp_request_check_status)                                                                                        \
    X(ucp_request_free)                                                                                                \
    X(ucp_rkey_buffer_release)                                                                                         \
    X(ucp_rkey_destroy)                                                                                                \
    X(ucp_rkey_pack)                                                                                                   \
    X(ucp_rkey_ptr)                                                                                                    \
    X(ucp_worker_arm)                                                                                                  \
    X(ucp_worker_create)                                                                                               \
    X(ucp_worker_destroy)                                                                                              \
    X(ucp_worker_flush_nbx)                                                                                            \
    X(ucp_worker_get_efd)                                                                                              \
    X(ucp_worker_progress)                                                                                             \
    X(ucp_worker_query)                                                                                                \
    X(ucp_worker_release_address)                                                                                      \
    X(ucp_worker_set_am_recv_handler)                                                                                  \
    X(ucs_status_string)

typedef struct {
#define KVT_UCX_POINTER(name) __typeof__(name) *name;
    KVT_UCX_FUNCTIONS(KVT_UCX_POINTER)
#undef KVT_UCX_POINTER
} kvt_ucx_functions;

/* Filled once kvt_ucx_unavailable() returned NULL; read-only after. */
extern kvt_ucx_functions kvt_ucx;

#ifndef KVT_UCX_API_LOADER
/* ucp_init is an inline function of ucp.h that calls ucp_init_version with the headers' API version. */
#define ucp_init(params, config, context)                                                                              \
    kvt_ucx.ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, params, config, context)
#define ucp_am_recv_data_nbx kvt_ucx.ucp_am_recv_data_nbx
#define ucp_am_send_nbx kvt_ucx.ucp_am_send_nbx
#define ucp_cleanup kvt_ucx.ucp_cleanup
#define ucp_config_modify kvt_ucx.ucp_config_modify
#define ucp_config_print kvt_ucx.ucp_config_print
#define ucp_config_read kvt_ucx.ucp_config_read
#define ucp_config_release kvt_ucx.ucp_config_release
#define ucp_ep_close_nbx kvt_ucx.ucp_ep_close_nbx
#define ucp_ep_create kvt_ucx.ucp_ep_create
#define ucp_ep_flush_nbx kvt_ucx.ucp_ep_flush_nbx
#define ucp_ep_print_info kvt_ucx.ucp_ep_print_info
#define ucp_ep_rkey_unpack kvt_ucx.ucp_ep_rkey_unpack
#define ucp_get_nbx kvt_ucx.ucp_get_nbx
#define ucp_mem_map kvt_ucx.ucp_mem_map
#define ucp_mem_query kvt_ucx.ucp_mem_query
#define ucp_mem_unmap kvt_ucx.ucp_mem_unmap
#define ucp_put_nbx kvt_ucx.ucp_put_nbx
#define ucp_request_cancel kvt_ucx.ucp_request_cancel
#define ucp_request_check_status kvt_ucx.ucp_request_check_status
#define ucp_request_free kvt_ucx.ucp_request_free
#define ucp_rkey_buffer_release kvt_ucx.ucp_rkey_buffer_release
#define ucp_rkey_destroy kvt_ucx.ucp_rkey_destroy
#define ucp_rkey_pack kvt_ucx.ucp_rkey_pack
#define ucp_rkey_ptr kvt_ucx.ucp_rkey_ptr
#define ucp_worker_arm kvt_ucx.ucp_worker_arm
#define ucp_worker_create kvt_ucx.ucp_worker_create
#define ucp_worker_destroy kvt_ucx.ucp_worker_destroy
#define ucp_worker_flush_nbx kvt_ucx.ucp_worker_flush_nbx
#define ucp_worker_get_efd kvt_ucx.ucp_worker_get_efd
#define ucp_worker_progress kvt_ucx.ucp_worker_progress
#define ucp_worker_query kvt_ucx.ucp_worker_query
#define ucp_worker_release_address kvt_ucx.ucp_worker_release_address
#define ucp_worker_set_am_recv_handler kvt_ucx.ucp_worker_set_am_recv_handler
#define ucs_status_string kvt_ucx.ucs_status_string
#endif

#endif
