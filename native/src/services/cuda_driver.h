/* The CUDA driver API, loaded at run time (cuda_driver.c): the few types and constants the library uses,
 * declared here so that building needs no CUDA headers, and the table of entry points resolved from
 * libcuda.so.1 on first use. A machine without a GPU or driver still loads the library; the vram memory
 * kind then says why it is unavailable (kvt_cuda_unavailable). */
#ifndef KVT_CUDA_DRIVER_H
#define KVT_CUDA_DRIVER_H

#include "kvreuse_transport.h"

#include <stddef.h>
#include <stdint.h>

/* The soname dlopen asks for; KVT_CUDA_LIBRARY (environment) names another file (the tests' fake driver). */
#define KVT_CUDA_LIBRARY "libcuda.so.1"
#define KVT_CUDA_LIBRARY_ENV "KVT_CUDA_LIBRARY"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
#define KVT_CU_IPC_HANDLE_SIZE 64
typedef struct {
    char reserved[KVT_CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;

enum {
    KVT_CUDA_SUCCESS = 0,
    KVT_CUDA_ERROR_INVALID_VALUE = 1,
    KVT_CUDA_ERROR_OUT_OF_MEMORY = 2,
    KVT_CUDA_ERROR_NO_DEVICE = 100,
    KVT_CUDA_ERROR_NOT_READY = 600,
};
enum { /* CUpointer_attribute */
       KVT_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
       KVT_CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
       KVT_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
       KVT_CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
       KVT_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
       KVT_CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
};
enum { /* CUmemorytype */
       KVT_CU_MEMORYTYPE_HOST = 1,
       KVT_CU_MEMORYTYPE_DEVICE = 2,
       KVT_CU_MEMORYTYPE_ARRAY = 3,
       KVT_CU_MEMORYTYPE_UNIFIED = 4,
};
#define KVT_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1u
#define KVT_CU_STREAM_NON_BLOCKING 0x1u
#define KVT_CU_EVENT_DISABLE_TIMING 0x2u
#define KVT_CU_MEMHOSTALLOC_PORTABLE 0x1u
#define KVT_CU_MEMHOSTREGISTER_PORTABLE 0x1u

/* X(field, exported symbol, return type, parameters): the entry points, by the versioned names cuda.h maps
 * its calls to. */
#define KVT_CUDA_FUNCTIONS(X)                                                                                          \
    X(Init, cuInit, CUresult, (unsigned int flags))                                                                    \
    X(DriverGetVersion, cuDriverGetVersion, CUresult, (int *version))                                                  \
    X(DeviceGetCount, cuDeviceGetCount, CUresult, (int *count))                                                        \
    X(DeviceGet, cuDeviceGet, CUresult, (CUdevice * device, int ordinal))                                              \
    X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, CUresult, (CUcontext * context, CUdevice device))              \
    X(CtxSetCurrent, cuCtxSetCurrent, CUresult, (CUcontext context))                                                   \
    X(MemAlloc, cuMemAlloc_v2, CUresult, (CUdeviceptr * pointer, size_t size))                                         \
    X(MemFree, cuMemFree_v2, CUresult, (CUdeviceptr pointer))                                                          \
    X(PointerGetAttribute, cuPointerGetAttribute, CUresult, (void *data, int attribute, CUdeviceptr pointer))          \
    X(PointerGetAttributes, cuPointerGetAttributes, CUresult,                                                          \
      (unsigned int count, int *attributes, void **data, CUdeviceptr pointer))                                         \
    X(MemGetAddressRange, cuMemGetAddressRange_v2, CUresult, (CUdeviceptr * base, size_t * size, CUdeviceptr pointer)) \
    X(IpcGetMemHandle, cuIpcGetMemHandle, CUresult, (CUipcMemHandle * handle, CUdeviceptr pointer))                    \
    X(IpcOpenMemHandle, cuIpcOpenMemHandle_v2, CUresult,                                                               \
      (CUdeviceptr * pointer, CUipcMemHandle handle, unsigned int flags))                                              \
    X(IpcCloseMemHandle, cuIpcCloseMemHandle, CUresult, (CUdeviceptr pointer))                                         \
    X(StreamCreate, cuStreamCreate, CUresult, (CUstream * stream, unsigned int flags))                                 \
    X(StreamDestroy, cuStreamDestroy_v2, CUresult, (CUstream stream))                                                  \
    X(StreamSynchronize, cuStreamSynchronize, CUresult, (CUstream stream))                                             \
    X(EventCreate, cuEventCreate, CUresult, (CUevent * event, unsigned int flags))                                     \
    X(EventRecord, cuEventRecord, CUresult, (CUevent event, CUstream stream))                                          \
    X(EventQuery, cuEventQuery, CUresult, (CUevent event))                                                             \
    X(EventDestroy, cuEventDestroy_v2, CUresult, (CUevent event))                                                      \
    X(MemHostAlloc, cuMemHostAlloc, CUresult, (void **pointer, size_t size, unsigned int flags))                       \
    X(MemFreeHost, cuMemFreeHost, CUresult, (void *pointer))                                                           \
    X(MemHostRegister, cuMemHostRegister_v2, CUresult, (void *pointer, size_t size, unsigned int flags))               \
    X(MemHostUnregister, cuMemHostUnregister, CUresult, (void *pointer))                                               \
    X(MemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, CUresult,                                                                 \
      (CUdeviceptr destination, CUdeviceptr source, size_t size, CUstream stream))                                     \
    X(MemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, CUresult,                                                                 \
      (CUdeviceptr destination, const void *source, size_t size, CUstream stream))                                     \
    X(MemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, CUresult,                                                                 \
      (void *destination, CUdeviceptr source, size_t size, CUstream stream))                                           \
    X(ModuleLoadData, cuModuleLoadData, CUresult, (CUmodule * module, const void *image))                              \
    X(ModuleGetFunction, cuModuleGetFunction, CUresult, (CUfunction * function, CUmodule module, const char *name))    \
    X(ModuleUnload, cuModuleUnload, CUresult, (CUmodule module))                                                       \
    X(LaunchKernel, cuLaunchKernel, CUresult,                                                                          \
      (CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z, unsigned int block_x,       \
       unsigned int block_y, unsigned int block_z, unsigned int shared_bytes, CUstream stream, void **parameters,      \
       void **extra))                                                                                                  \
    X(GetErrorName, cuGetErrorName, CUresult, (CUresult error, const char **name))                                     \
    X(GetErrorString, cuGetErrorString, CUresult, (CUresult error, const char **text))

typedef struct {
#define KVT_CUDA_POINTER(field, symbol, result, parameters) result(*field) parameters;
    KVT_CUDA_FUNCTIONS(KVT_CUDA_POINTER)
#undef KVT_CUDA_POINTER
} kvt_cuda_functions;

/* Filled once kvt_cuda_unavailable() returned NULL; read-only after. */
extern kvt_cuda_functions kvt_cuda;

/* Loads the driver on the first call (once per process): NULL when a driver and at least one device
 * answer, else why not, in words starting with what is missing ("no driver library", "driver too old",
 * "no device", "the driver failed"), static storage. */
const char *kvt_cuda_unavailable(void);
/* Once loaded: the number of devices and the driver's version (e.g. 13000 for 13.0). */
uint32_t kvt_cuda_device_count(void);
int kvt_cuda_driver_version(void);
/* The driver's name and text for `error` ("CUDA_ERROR_INVALID_VALUE: invalid argument"), into `out`. */
const char *kvt_cuda_error_text(CUresult error, char *out, size_t size);
/* Makes device `device`'s primary context current on the calling thread (retained once per process and
 * device, kept until the process ends); BACKEND naming `call` when the driver refuses. */
kvt_status kvt_cuda_use_device(const char *call, uint32_t device);

#endif
